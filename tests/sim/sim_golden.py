"""Golden traces of the simulator: one small run per routing algorithm (and delay model, wrapper,
faults), each reduced to a SHA-256 of its complete trace (sends and receives included) and of its
summary without the wall-clock `performance` part.

The simulator is made faster without changing what it does: `tests/sim/test_sim_golden.py` holds
every run equal, event for event, to the digests stored in `tests/sim/data/sim_golden.json`, which
were produced by the simulator before it was sped up (issue 15). A change that *means* to change
runs (a new trace field, a protocol fix) regenerates them, and says so in its commit:

    python -m tests.sim.sim_golden --update
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

from weeble.core.rom import Algorithm
from weeble.model.scenario import Scenario

GOLDEN = Path(__file__).resolve().parent / "data" / "sim_golden.json"

# Filters that cover, overlap and equal each other (covering and merging have work to do),
# beside the workload's `class == k` subscribers.
EXPLICIT = ["class range [0, 5]", "class range [2, 3]", "class < 10", "class == 4",
            "class range [4, 7]", "class > 12"]


def variants() -> dict[str, dict[str, Any]]:
    """name -> what differs from the base scenario."""
    out: dict[str, dict[str, Any]] = {}
    for alg in Algorithm:
        for hierarchical in (False, True):
            if alg is Algorithm.FLOODING and hierarchical:
                continue
            out[f"{alg.value}-{'hier' if hierarchical else 'p2p'}"] = {
                "routing": {"algorithm": alg.value, "hierarchical": hierarchical}}
    out["identity-wrapper"] = {"routing": {"algorithm": "identity", "wrapper": True}}
    out["covering2-uniform"] = {"routing": {"algorithm": "covering2"},
                                "timing": {"delay": "uniform"}}
    out["identity-adversarial"] = {"routing": {"algorithm": "identity", "hierarchical": True},
                                   "timing": {"delay": "adversarial"}}
    # the coordinated link exchange (thesis ch. 4) and the Cost-and-Interest optimizer (ch. 5):
    # compiled too, so these hold the compiled exchange and optimizer to the pure-Python runs
    out["identity-exchange"] = {"timing": {"d": 4}, "reconfigurations": {
        "ordering": "fifo", "start": 8, "gap": 2, "operations": [
            {"op": "exchange", "remove": ["b1", "b3"], "add": ["b3", "b2"]},
            {"op": "exchange", "remove": ["b0", "b2"], "add": ["b2", "b4"]}]}}
    out["simple-optimizer"] = {"routing": {"algorithm": "simple"}, "timing": {"d": 6},
                               "optimizer": {"heuristic": "ci", "broadcast_interval": 2.5,
                                             "start": 6, "cost_every": 5,
                                             "link_costs": {"model": "plane", "max": 10},
                                             "processing_costs": {"model": "uniform",
                                                                  "max": 10}}}
    return out


def scenario(name: str) -> Scenario:
    change = variants()[name]
    base: dict[str, Any] = {
        "name": f"golden-{name}", "seed": 3, "duration": 45,
        "topology": {"kind": "kary", "m": 2, "levels": 3},
        "routing": {"algorithm": "identity"},
        "timing": {"pi": 6.5, "rho": 6, "delta_min": 0.01, "delta_max": 0.05,
                   "delay": "constant"},
        "workload": {"filter_classes": 16, "subscriptions": 40, "mean_lifetime": 20,
                     "publish_rate": 20, "subscriber_placement": "all",
                     "publisher_placement": "all"},
        "subscriptions": [{"client": f"x{i}", "broker": f"b{i % 7}", "filter": f,
                           "start": 1.0 + i, "end": 30.0 + i}
                          for i, f in enumerate(EXPLICIT)],
        "trace": {"sends": True, "snapshots_every": 5},
        "check_every": 2.0,
        "chaos": {"faults": [
            {"at": 12, "kind": "corrupt", "target": "b0", "field": "table.clear"},
            {"at": 20, "kind": "drop", "link": ["b0", "b1"], "probability": 0.5,
             "duration": 4},
        ]},
    }
    for key, value in change.items():
        base[key] = {**base.get(key, {}), **value}
    return Scenario.model_validate(base)


def digest(name: str) -> str:
    """SHA-256 over the run's trace files (in name order) and its summary minus performance."""
    return scenario_digest(scenario(name))


def scenario_digest(s: Scenario, *, progress: bool = False) -> str:
    """`digest` of any scenario (tests/sim/sim_hashorder.py uses it too); `progress`: the run
    in the slices that let the progress display follow it."""
    from weeble.chaos.runner import in_simulation
    from weeble.sim.run import simulate

    h = hashlib.sha256()
    with tempfile.TemporaryDirectory() as tmp:
        summary = simulate(s, tmp, progress=progress, faults=in_simulation(s)).as_dict()
        summary.pop("performance")
        h.update(json.dumps(summary, sort_keys=True).encode())
        for path in sorted((Path(tmp) / "trace").iterdir()):
            h.update(path.name.encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def stored() -> dict[str, str]:
    return json.loads(GOLDEN.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help=f"rewrite {GOLDEN.name}")
    args = parser.parse_args()
    digests = {name: digest(name) for name in variants()}
    if args.update:
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(digests)} digests to {GOLDEN}")
        return
    old = stored()
    for name, d in digests.items():
        print(f"{name:24} {'same' if old.get(name) == d else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
