"""`weeble shrink RUN`: a failing run cut down to what still breaks the same rule."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from weeble.commands import UsageError

# where `--into-tests` puts a shrunk scenario: the data of tests/chaos/test_shrunk.py
TESTS_DATA = Path("tests") / "chaos" / "data" / "shrunk"


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "shrink",
        help="cut a failing run down to a minimal scenario that breaks the same rule",
        description="Shrink a failing simulated run: RUN is a directory `weeble explore` wrote"
                    " for a failing seed (RUN/scenario.yaml) or a scenario YAML file. Delta"
                    " debugging over the faults and their times and durations, the"
                    " reconfigurations, the clients (the workload written out as explicit"
                    " subscriptions and publications), the brokers (leaves) and the duration,"
                    " keeping each cut while the same rule still fails. Writes the minimal"
                    " scenario (RUN/minimal.yaml, or --out) that `weeble simulate` runs, with"
                    " its verdict and how many runs shrinking took.",
    )
    p.add_argument("run", help="a failing seed's directory (from weeble explore) or a scenario")
    p.add_argument("--rule", help="the rule to keep failing (default: the first the run breaks,"
                                  " e.g. 'R11 service-level stabilization > Δ')")
    p.add_argument("--out", metavar="FILE", help="where the minimal scenario goes")
    p.add_argument("--max-runs", type=int, default=600,
                   help="stop after this many simulations (default 600)")
    p.add_argument("--into-tests", metavar="NAME",
                   help=f"also write it to {TESTS_DATA}/NAME.yaml with its expected verdict"
                        " (tests/chaos/test_shrunk.py runs every such scenario)")
    p.add_argument("--tests-dir", default=str(TESTS_DATA), help=argparse.SUPPRESS)
    p.add_argument("--quiet", action="store_true", help="no progress")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import yaml

    from weeble.chaos.explore import dump_scenario
    from weeble.chaos.shrink import Shrinker, ShrinkError

    source = Path(args.run)
    path = source / "scenario.yaml" if source.is_dir() else source
    if not path.is_file():
        raise UsageError(f"{args.run}: no scenario (a directory with scenario.yaml, or a"
                         " scenario YAML file)")
    if args.into_tests is not None and not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", args.into_tests):
        raise UsageError(f"--into-tests {args.into_tests!r}: a name of a-z, 0-9, _ and -")
    from weeble.model.scenario import load_scenario

    load_scenario(path)  # a scenario with a problem says so as any command does
    data = yaml.safe_load(path.read_text(encoding="utf-8"))

    def say(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    try:
        shrinker = Shrinker(data, args.rule, max_runs=args.max_runs, say=say)
    except ShrinkError as exc:
        raise UsageError(f"{path}: {exc}") from None
    result = shrinker.shrink()
    verdict = result.summary["verdict"]
    comment = (f"shrunk by `weeble shrink` from {path} in {result.runs} runs\n"
               f"breaks: {result.rule}\nverdict: {verdict['status']}"
               + "".join(f"\n  - {r}" for r in verdict["reasons"][:3])
               + f"\nbefore: {_sizes(result.before)}\nafter:  {_sizes(result.after)}")
    text = dump_scenario(result.data, comment=comment)
    out = Path(args.out) if args.out else (source if source.is_dir() else source.parent) / (
        "minimal.yaml" if source.is_dir() else f"{source.stem}.minimal.yaml")
    out.write_text(text)
    report = {"rule": result.rule, "verdict": verdict["status"], "runs": result.runs,
              "before": result.before, "after": result.after, "scenario": str(out)}
    if args.into_tests is not None:
        tests = Path(args.tests_dir)
        tests.mkdir(parents=True, exist_ok=True)
        (tests / f"{args.into_tests}.yaml").write_text(text)
        (tests / f"{args.into_tests}.expect.json").write_text(json.dumps(
            {"status": verdict["status"], "rule": result.rule}, indent=2,
            ensure_ascii=False) + "\n")
        report["test"] = str(tests / f"{args.into_tests}.yaml")
    print(json.dumps(report, ensure_ascii=False))
    print(f"wrote {out}: weeble simulate {out} --out runs/{out.stem}", file=sys.stderr)
    return 0


def _sizes(s: dict[str, Any]) -> str:
    return ", ".join(f"{v:g} {k}" for k, v in s.items())
