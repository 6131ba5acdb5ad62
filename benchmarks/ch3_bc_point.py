"""One point of `weeble reproduce ch3 --full` alone: its control traffic bc against the model,
with the subscription messages counted apart (docs/reproduce.md, issue 25 item 5).

    python benchmarks/ch3_bc_point.py 100 60 60 400000     # ω (1/s), µ⁻¹ (s), ρ (s), N_s

Runs `ch3.simulated(ch3.sim_scenario(...))` (the 121-broker setup of the simulation column) and
prints one JSON line: bc and the model's, the flag-1 forwards of new subscriptions (`flag1`), their
onward hops (`relayed`), the model's toggles (`toggle`), the subscriptions sent for a filter to a
neighbour a second time in one overrun period (`repeats`), all in messages/s over the steady
window (weeble.core.routing.leasing.NewSubscriptionTally), bc minus each of them against the
model, the events and the CPU time.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from weeble.analytics.reproduce import ch3
from weeble.sim import run as simrun


def main(argv: list[str]) -> None:
    omega, mu_inv, rho, n = (float(x) for x in argv)
    steady: dict[str, Any] = {}
    report = simrun.Steady.report

    def keep(self: simrun.Steady) -> dict[str, Any]:
        out = report(self)
        steady.update(out)
        return out

    simrun.Steady.report = keep  # type: ignore[method-assign]
    cpu = time.process_time()
    scenario = ch3.sim_scenario(tree=ch3.TREE, z=ch3.Z, omega=omega, mu_inv=mu_inv, rho=rho, n=n)
    sim = ch3.simulated(scenario)
    cpu = time.process_time() - cpu
    model = ch3.model(omega=omega, mu_inv=mu_inv, rho=rho, n=n)
    span = steady["until"] - steady["from"]
    counts = steady["new_subscriptions"]
    rates = {k: v / span for k, v in counts.items()}
    rates["repeats"] = rates.pop("repeat_new") + rates.pop("repeat_refresh")
    bc, model_bc = sim["b_c"], model.b_c or float("nan")
    print(
        json.dumps(
            {
                "point": {"omega": omega, "mu_inv": mu_inv, "rho": rho, "n": n},
                "bc": bc,
                "model_bc": model.b_c,
                "bc_vs_model": bc / model_bc - 1,
                **rates,
                **{
                    f"bc_minus_{k}_vs_model": (bc - rates[k]) / model_bc - 1
                    for k in ("flag1", "repeats")
                },
                "counts": counts,
                "messages": steady["messages"],
                "window_s": span,
                "x": sim["x"],
                "model_x": model.x,
                "events": sim["events"],
                "cpu_s": cpu,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
