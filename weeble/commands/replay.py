"""`weeble replay SCENARIO --backend B --tries K`: a (minimal) scenario on live brokers."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from weeble.commands import UsageError


def register(subparsers: Any) -> None:
    from weeble.orchestrator.backend import BACKEND_KINDS

    p: argparse.ArgumentParser = subparsers.add_parser(
        "replay",
        help="run a (minimal) scenario on live brokers K times: does the same rule fail?",
        description="Run SCENARIO (typically the minimal scenario `weeble shrink` wrote) on"
                    " live brokers --tries times, one `weeble run` each, and judge each try's"
                    " trace with the reference checker. Reports per try whether the same rule"
                    " failed (the rule the scenario's `# breaks:` comment names, or --rule),"
                    " with the timing model's figures of that try: live timing is not"
                    " deterministic, so the result is a rate. Exit status 0 when at least one"
                    " try reproduced the rule, 1 when none did.",
    )
    p.add_argument("scenario", help="scenario YAML file")
    p.add_argument("--backend", choices=[b for b in BACKEND_KINDS if b != "k8s"],
                   default="local", help="where the brokers run (default local)")
    p.add_argument("--tries", type=int, default=5, metavar="K", help="how many runs (default 5)")
    p.add_argument("--rule", help="the rule expected to fail (default: the scenario's"
                                  " `# breaks:` comment)")
    p.add_argument("--runs-dir", default="runs", metavar="DIR",
                   help="parent of the tries' run directories (default: runs)")
    p.add_argument("--timeout", type=float, metavar="S",
                   help="give up a try after S s (default: 3 x the duration + 120)")
    p.add_argument("--no-link-delays", action="store_true",
                   help="loopback speed: do not emulate the scenario's link delays (by default"
                        " every try delays broker-to-broker messages as its timing model does,"
                        " `weeble run --link-delays`)")
    p.add_argument("--json", action="store_true", help="the report as JSON on stdout")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from weeble.chaos.replay import expected_rule, replay
    from weeble.model.scenario import load_scenario

    path = Path(args.scenario)
    scenario = load_scenario(path)
    if args.tries < 1:
        raise UsageError("--tries must be >= 1")
    rule = args.rule or expected_rule(path.read_text(encoding="utf-8"))
    if rule is None:
        raise UsageError(f"{path}: no `# breaks: RULE` comment (as `weeble shrink` writes):"
                         " say which rule with --rule")
    timeout = args.timeout or 3 * scenario.duration + 120

    def said(t: Any) -> None:
        where = f"{t.status}" + (f" ({t.error})" if t.error else "")
        figures = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                            for k, v in t.timing.items() if not isinstance(v, dict))
        print(f"try {t.index}: {'REPRODUCED' if t.reproduced else 'not reproduced'}:"
              f" {where}; rules {t.rules or 'none'}; timing: {figures or '-'}"
              f" [{t.run_dir}]", file=sys.stderr, flush=True)

    tries = replay(path, rule=rule, tries=args.tries, backend=args.backend,
                   runs_dir=Path(args.runs_dir), timeout=timeout, on_try=said,
                   link_delays=not args.no_link_delays)
    hits = sum(t.reproduced for t in tries)
    report = {"scenario": str(path), "rule": rule, "backend": args.backend,
              "tries": len(tries), "reproduced": hits,
              "link_delays": not args.no_link_delays,
              "errors": sum(t.status == "error" for t in tries),
              "per_try": [t.as_dict() for t in tries]}
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print(f"{path.name} on {args.backend}: {rule} reproduced in {hits} of {len(tries)}"
              " tries")
    return 0 if hits else 1
