"""`weeble simulate SCENARIO.yaml --out DIR`: a deterministic simulated run."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from weeble.commands import add_junit_option, add_mode_option


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "simulate",
        help="run a scenario in the discrete-event simulator",
        description="Run SCENARIO in the discrete-event simulator, in virtual time and"
                    " deterministically from its seed: its workload, and its chaos experiment"
                    " (or --chaos FILE) as the faults. Writes DIR/summary.json (deliveries"
                    " judged against the subscriptions, legitimacy checks, stabilization) and"
                    " the traces in DIR/trace/.",
    )
    p.add_argument("scenario", help="scenario YAML file")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.add_argument("--chaos", metavar="FILE",
                   help="run this chaos experiment (a `weeble chaos` file) instead of the"
                        " scenario's own")
    add_mode_option(p)
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar, no summary or verdict table on stdout")
    add_junit_option(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from weeble.chaos.runner import in_simulation
    from weeble.model.scenario import load_scenario, with_chaos, with_mode
    from weeble.sim.run import simulate

    scenario = load_scenario(args.scenario)
    if args.mode is not None:
        scenario = with_mode(scenario, args.mode)
    if args.chaos is not None:
        scenario = with_chaos(scenario, args.chaos)
    summary = simulate(scenario, args.out, progress=not args.quiet,
                       faults=in_simulation(scenario))
    # the scenario as it ran (with --mode and --chaos applied), as a live run keeps it: the
    # report's commands run it again from here
    (Path(args.out) / "scenario.json").write_text(
        json.dumps(scenario.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
    if not args.quiet:
        d = summary.deliveries
        digest = {
            "messages": summary.messages["total"],
            "deliveries": d["delivered"],
            "missing": d["missing"],
            "duplicate": d["duplicate"],
            "spurious": d["spurious"],
            "fifo": d["fifo"],
            # per episode, from the end of its last fault (None: no fault, no stabilization)
            "stabilization": summary.stabilization,
            "bound": round(summary.bound, 6),
            "verdict": summary.verdict["status"],
            "events_per_wall_second": round(summary.performance["events_per_wall_second"]),
        }
        o = summary.optimizer
        if o is not None:  # the tree optimizer: its exchanges in sum, the cost before and now
            def per(w: dict[str, Any]) -> float | None:
                return round(w["cost"] / w["notifications"], 3) if w["notifications"] else None

            rs = summary.reconfigurations
            digest["optimizer"] = {
                "heuristic": o["heuristic"], "exchanges": o["exchanges"]["done"],
                "cost_per_notification": {"first": per(o["series"][0]),
                                          "last": per(o["series"][-1])} if o["series"] else None,
                **{k: sum(r[k] for r in rs) for k in ("lost", "duplicated", "reordered")}}
        elif summary.reconfigurations:  # R15, one line each
            digest["reconfigurations"] = [
                {k: r[k] for k in ("rid", "op", "outcome", "lost", "duplicated", "reordered",
                                   "verdict")}
                | {"duration": None if r["duration"] is None else round(r["duration"], 4),
                   "coordination": r["coordination"]["total"]}
                for r in summary.reconfigurations]
        print(json.dumps(digest), file=sys.stdout)
        print(f"wrote {args.out}/summary.json", file=sys.stderr)
    v = summary.verdict
    if args.junit:
        from weeble.commands.junit import write_junit

        write_junit(args.junit, suite=scenario.name, verdict=v, faults=v["faults"],
                    reconfigurations=summary.reconfigurations, timing=summary.timing,
                    properties={"run": args.out, "judged by": "weeble simulate"})
    if not args.quiet:  # the same table as a live run, the verdict last
        from weeble.chaos.verdict import analysis_rows, print_verdict

        print_verdict(analysis_rows(v), bool(v["pass"]), v["reasons"],
                      measured_from=v.get("stabilization_measured_from"),
                      reconfigurations=summary.reconfigurations, status=v["status"])
    from weeble.check.status import exit_code

    return exit_code(v["status"])
