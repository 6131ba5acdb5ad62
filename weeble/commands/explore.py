"""`weeble explore SCENARIO --seeds N`: the scenario under N seeds, each with a random nemesis."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from weeble.commands import UsageError, add_mode_option
from weeble.progress import Progress


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "explore",
        help="run a scenario under many seeds, each with a random nemesis",
        description="Run SCENARIO in the simulator under N seeds. Each seed draws a random"
                    " nemesis (faults of the whole vocabulary: state faults on the corruption"
                    " targets of every layer inside the configuration's fault model, clocks,"
                    " injected messages, link faults, crashes, pauses, client crashes, and"
                    " reconfigurations or recolours) and its own workload; the reference"
                    " checker judges each run. Prints the failing seeds grouped by the rule"
                    " they break, with the first failing episode, and the coverage (with the"
                    " targets left out as outside the fault model, and why). Each failing"
                    " seed's scenario is written to OUT/seed-<n>/scenario.yaml (`weeble"
                    " simulate` and `weeble shrink` take it). Exit status 1 when a seed fails"
                    " (a seed failing with a fault outside the fault model does not count).",
    )
    p.add_argument("scenario", help="scenario YAML file (its own faults are replaced)")
    p.add_argument("--seeds", type=int, required=True, metavar="N", help="how many seeds")
    p.add_argument("--first-seed", type=int, default=1, metavar="S",
                   help="seeds S .. S+N-1 (default 1)")
    p.add_argument("--jobs", "-j", type=int, default=1, metavar="J",
                   help="runs in parallel processes (default 1)")
    p.add_argument("--rate", type=float, default=5.0,
                   help="faults per 100 simulated s of the fault window, at least 1 per run"
                        " (default 5)")
    p.add_argument("--mix", default="default", metavar="FAMILY=W,...",
                   help="weight of each fault family: state, clock, message, link, process,"
                        " client, reconfigure (left out: 0; default: state=4, link=3, the"
                        " others 1)")
    p.add_argument("--max-faults", type=int, default=6, help="at most this many per run")
    p.add_argument("--max-duration", type=float, default=8.0,
                   help="longest lasting fault, s (default 8)")
    p.add_argument("--exclude", default="", metavar="TARGET,...",
                   help="corruption targets left out, by name or prefix (`entry.insert,adv.`)")
    p.add_argument("--outside-model", action="store_true",
                   help="draw the faults outside the configuration's fault model too (the"
                        " static overlay's neighbour set and the link exchange's RAM, which no"
                        " layer repairs, and message loss on an exchange's cycle while it runs;"
                        " docs/findings.md); a seed that fails with one of them is reported"
                        " apart, as outside the fault model")
    p.add_argument("--duration", type=float, metavar="S",
                   help="run each seed this many simulated s instead of the scenario's")
    add_mode_option(p)
    p.add_argument("--out", metavar="DIR", help="where failing seeds go (default:"
                   " runs/explore-<scenario>)")
    p.add_argument("--check-determinism", action="store_true",
                   help="run each seed twice (with traces) and compare the digests")
    p.add_argument("--stop-after", type=int, metavar="K",
                   help="stop once K seeds failed")
    p.add_argument("--json", action="store_true", help="the report as JSON on stdout")
    p.add_argument("--quiet", action="store_true", help="no progress")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from weeble.chaos.explore import explore
    from weeble.chaos.nemesis import Nemesis, NemesisError, parse_mix
    from weeble.model.scenario import load_scenario, with_mode

    if args.seeds < 1 or args.jobs < 1:
        raise UsageError("--seeds and --jobs must be >= 1")
    scenario = load_scenario(args.scenario)
    if args.mode is not None:
        scenario = with_mode(scenario, args.mode)
    if args.duration is not None:
        if args.duration <= 0:
            raise UsageError("--duration must be > 0")
        scenario = scenario.model_copy(update={"duration": args.duration, "chaos": None})
    from weeble.core.broker import FAULTS

    exclude = tuple(x.strip() for x in args.exclude.split(",") if x.strip())
    for x in exclude:
        if not any(name.startswith(x) for name in FAULTS.targets):
            raise UsageError(f"--exclude: {x!r} names no corruption target (they are"
                             f" {', '.join(sorted(FAULTS.targets))})")
    try:
        nemesis = Nemesis(rate=args.rate, mix=parse_mix(args.mix), max_faults=args.max_faults,
                          max_duration=args.max_duration, exclude=exclude,
                          outside_model=args.outside_model)
        from weeble.chaos.nemesis import draw

        draw(scenario, args.first_seed, nemesis)  # a nemesis that cannot apply says so now
    except NemesisError as exc:
        raise UsageError(str(exc)) from None
    out = Path(args.out or f"runs/explore-{scenario.name}")
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    with Progress(f"explore {scenario.name}", unit="seeds", total=len(seeds),
                  quiet=args.quiet) as bar:
        report = explore(scenario, seeds, jobs=args.jobs, nemesis=nemesis, out=out,
                         check_determinism=args.check_determinism, stop_after=args.stop_after,
                         progress=lambda done, total, failing: bar.update(
                             done, total=total, detail=f"{failing} failing"))
    result = report.as_dict(scenario)
    out.mkdir(parents=True, exist_ok=True)
    (out / "explore.json").write_text(json.dumps(result, indent=2) + "\n")
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(render(result, out))
    differing = result.get("determinism", {}).get("differing", [])
    return 1 if report.failing or differing else 0


def render(r: dict[str, Any], out: Path) -> str:
    c = r["coverage"]
    lines = [f"{r['scenario']}: {r['seeds']} seeds from {r['first_seed']},"
             f" {r['failing']} failing"
             + (f", {r['failing_outside_model']} failing outside the fault model"
                if c["outside_model"]["drawn"] else "")
             + f" ({r['wall_time']:.1f} s wall)"]
    lines += _groups(r["by_rule"], out)
    if r["outside_model_by_rule"]:
        lines.append("outside the fault model (a fault the configuration's model leaves out;"
                     " not held to the bound):")
        lines += _groups(r["outside_model_by_rule"], out)
    d = r.get("determinism")
    if d is not None:
        lines.append(f"determinism: {d['checked']} seeds run twice, "
                     + (f"DIFFERING: {d['differing']}" if d["differing"] else "all identical"))
    lines.append(f"coverage: {c['algorithm']}{' hierarchical' if c['hierarchical'] else ''},"
                 f" mode {c['mode']}, overlay {c['overlay']}; {c['faults']} faults"
                 f" ({c['took_effect']} took effect), {c['reconfigurations']} reconfigurations;"
                 f" verdicts {c['statuses']}")
    lines.append(f"  kinds: {c['kinds']}")
    lines.append(f"  layers: {c['layers']}")
    lines.append(f"  corruption targets: {len(c['fields'])}: {', '.join(c['fields'])}")
    outside = c["outside_model"]["targets"]
    if outside:
        why: dict[str, list[str]] = {}
        for target, reason in outside.items():
            why.setdefault(reason, []).append(target)
        how = "drawn too (--outside-model)" if c["outside_model"]["drawn"] else \
            "left out; --outside-model draws them"
        lines.append(f"  outside the fault model, {how}:")
        lines += [f"    {', '.join(targets)}: {reason}" for reason, targets in why.items()]
    lines.append(f"  rules broken: {c['rules_broken'] or 'none'}")
    lines.append(f"wrote {out}/explore.json")
    return "\n".join(lines)


def _groups(by_rule: dict[str, list[dict[str, Any]]], out: Path) -> list[str]:
    lines: list[str] = []
    for rule, seeds in by_rule.items():
        lines.append(f"  {rule}: {len(seeds)} seed(s): "
                     + ", ".join(str(s["seed"]) for s in seeds[:20])
                     + (" ..." if len(seeds) > 20 else ""))
        first = seeds[0]
        lines.append(f"    first: seed {first['seed']}, {first['part']}: {first['reason']}")
        e = first["first_failing_episode"]
        if e is not None:
            lines.append(f"    episode {e['index']}: faults {', '.join(e['faults'])},"
                         f" {e['begin']:g}-{e['end']:g} s; service {e['service_status']},"
                         f" state {e['state_status']}")
        lines.append(f"    weeble shrink {out}/seed-{first['seed']}")
    return lines
