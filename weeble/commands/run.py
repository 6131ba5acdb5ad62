"""`weeble run SCENARIO`: a live run end to end — up, the workload and the scenario's chaos
experiment for the duration, down, analysis, verdict.

The traces land in runs/<id>/trace/ (with chaos.jsonl, the evidence of every injected fault),
a summary in runs/<id>/summary.json; a short version of it is printed. Then the analytics
(weeble.analytics, in this process) judge the run: the verdict table per fault goes to stdout
with the report's path, and the exit status is the verdict's (weeble.check.status). The
brokers are stopped on every way out (normal end, error, Ctrl-C, SIGTERM).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from weeble.commands import add_junit_option, add_mode_option
from weeble.commands.up import add_placement_options


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "run",
        help="run a scenario live end to end: up, workload and chaos, down, analysis, verdict",
        description="A live run end to end: start SCENARIO's brokers, drive its workload"
                    " against them for the duration while its chaos experiment (or --chaos"
                    " FILE) injects faults, stop the brokers and collect the traces into the run"
                    " directory, then analyze them (PySpark) and print the verdict per fault"
                    " with the report's path. Exit status: the verdict's (0 pass, 1 fail, 3"
                    " assumptions violated, 4 not judged, 5 no checks observed; 1 also when a"
                    " fault did not take effect), 2 on a user error.",
    )
    p.add_argument("scenario", help="scenario YAML file")
    p.add_argument("--duration", type=float, metavar="S",
                   help="seconds of workload (overrides the scenario's duration)")
    add_mode_option(p)
    p.add_argument("--quiet", action="store_true", help="no progress display")
    p.add_argument("--chaos", metavar="FILE",
                   help="run this chaos experiment (a `weeble chaos` file) instead of the"
                        " scenario's own")
    p.add_argument("--no-chaos", action="store_true",
                   help="do not apply any chaos experiment")
    p.add_argument("--no-analysis", action="store_true",
                   help="stop after collecting the traces (no Spark analysis, no verdict)")
    p.add_argument("--link-delays", action="store_true",
                   help="delay every broker-to-broker message as the scenario's timing model"
                        " does (δmax, or uniform in [δmin, δmax]) in the brokers' link shapers,"
                        " unless its live.links shape them already; loopback alone is far"
                        " faster than δmin")
    add_junit_option(p)
    add_placement_options(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from weeble.commands import OPEN_CLIENTS_NOTE, UsageError
    from weeble.model.scenario import load_scenario, with_chaos, with_link_delays, with_mode
    from weeble.orchestrator.local import signals_raise
    from weeble.orchestrator.summary import summarize
    from weeble.orchestrator.testbed import Testbed
    from weeble.orchestrator.workload import LiveWorkload, WorkloadStats
    from weeble.progress import Progress

    if args.junit and args.no_analysis:
        raise UsageError("--junit needs the analysis' verdict: drop --no-analysis (or judge"
                         " the run later: weeble check RUN_DIR --junit FILE)")
    scenario = load_scenario(args.scenario)
    if args.duration is not None and not args.duration > 0:
        raise UsageError(f"--duration: must be > 0, got {args.duration}")
    duration = args.duration if args.duration is not None else scenario.duration
    if args.mode is not None:
        scenario = with_mode(scenario, args.mode)
    if args.chaos is not None:
        scenario = with_chaos(scenario, args.chaos)
    if args.link_delays:
        scenario = with_link_delays(scenario)
    with signals_raise():
        bed = Testbed.plan(scenario, runs_dir=args.runs_dir, run_id=args.run_id,
                           base_host=args.base_host, any_ports=args.any_ports,
                           backend=args.backend)
        with bed, Progress(f"starting {len(bed.brokers)} brokers", unit="s", total=duration,
                           quiet=args.quiet) as progress:
            progress.describe(progress.what)
            bed.up(on_event=lambda msg: progress.update(0, detail=msg))
            if bed.open_clients:
                progress.print(OPEN_CLIENTS_NOTE)

            def tick(elapsed: float, s: WorkloadStats) -> None:
                progress.update(min(elapsed, duration),
                                detail=f"subs {s.live} pubs {s.publications}"
                                       f" deliveries {s.deliveries} errors {s.errors}")

            addresses = {b: a.listen for b, a in bed.addresses().items()}
            workload = LiveWorkload(scenario, addresses,
                                    bed.trace_dir if scenario.trace.enabled else None,
                                    tokens=bed.client_token, tls=bed.client_tls())
            chaos = None
            if scenario.chaos is not None and not args.no_chaos:
                from weeble.chaos.runner import ChaosRunner
                from weeble.model.experiment import timing_warnings

                chaos = ChaosRunner(bed, scenario.chaos, until=duration, clients=workload,
                                    on_event=lambda msg: progress.print(f"chaos {msg}"))
                for warning in timing_warnings(scenario.chaos, scenario.params):
                    progress.print(f"warning: {warning}")
            manager = None
            optimizing = (scenario.optimizer is not None
                          and scenario.optimizer.heuristic != "none")
            if scenario.reconfigurations.operations or optimizing:
                def said(msg: str) -> None:
                    progress.print(f"reconfigure {msg}")

                manager = (bed, scenario, said)
            warm = None
            rate = scenario.live.warm_start_rate
            if rate is not None and scenario.workload is not None:
                async def warm() -> None:
                    # the workload's initial subscriptions in place before the run's origin
                    progress.describe(f"warm start {bed.run_id}")
                    await workload.warm_start(rate, duration, on_progress=lambda n: (
                        progress.update(0, detail=f"{n} subscribed before t = 0")))
                    bed.origin()
                    progress.describe(f"run {bed.run_id}")

            if warm is None:
                progress.describe(f"run {bed.run_id}")
            stats, outcomes = asyncio.run(_drive(workload, chaos, duration, tick, manager,
                                                 warm))
            progress.describe("stopping", "draining, collecting traces")
            bed.down()
    summary: dict[str, Any] = {"run_id": bed.run_id, "duration": duration,
                               "workload": stats.as_dict()}
    if scenario.trace.enabled:
        summary["traces"] = summarize(bed.trace_dir, bed.brokers)
    if outcomes:
        summary["chaos"] = [o.as_dict() for o in outcomes]
    (bed.run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    t = summary.get("traces", {})
    short = {
        "run_id": bed.run_id,
        "publications": t.get("publications", stats.publications),
        "deliveries": t.get("deliveries", stats.deliveries),
        "duplicate_deliveries": t.get("duplicate_deliveries"),
        "subscriptions": stats.subscriptions,
        "messages": t.get("messages"),
        "client_errors": stats.errors,
    }
    print(json.dumps(short))
    print(f"wrote {bed.run_dir}/summary.json and trace/", file=sys.stderr)
    if stats.last_error:
        print(f"weeble: warning: last client error: {stats.last_error}", file=sys.stderr)
    for limit, cut in sorted(stats.capped.items()):  # never a silent cut (summary.json too)
        print(f"weeble: warning: {limit} cut {cut} planned actions of the scenario's workload",
              file=sys.stderr)
    for limit, cut in t.get("limits", {}).items():  # the brokers' limits, from their traces
        print(f"weeble: warning: the live limit {limit} cut {cut:,} messages, deliveries or"
              f" streams of this run (docs/guide/live-limits.md)", file=sys.stderr)
    if args.no_analysis:
        return 0
    return judge(bed.run_dir, outcomes, quiet=args.quiet, junit=args.junit)


async def _drive(workload: Any, chaos: Any, duration: float, tick: Any, manager: Any = None,
                 warm: Callable[[], Awaitable[None]] | None = None) -> tuple[Any, list[Any]]:
    """The workload for the duration, the chaos experiment and the scenario's reconfigurations
    beside it on the same clock; when the workload ends, so does the experiment (its lasting
    faults are ended first); reconfigurations still under way are left to end (they are
    traced as pending). `warm`: the workload's warm start and the run's origin, before
    all of them start their clocks."""
    if warm is not None:
        await warm()
    task = asyncio.create_task(chaos.run()) if chaos is not None else None
    async with contextlib.AsyncExitStack() as stack:
        if manager is not None:
            bed, scenario, said = manager
            live = await stack.enter_async_context(bed.reconfigurer(
                clients=workload, t0=asyncio.get_running_loop().time(), on_event=said))
            live.schedule(scenario.reconfiguration_plan(), scenario.reconfigurations.start)
            if scenario.optimizer is not None and scenario.optimizer.heuristic != "none":
                # its exchanges adopted (R15) and the tree's cost over time (`tree_cost`)
                live.monitor_costs(scenario, duration)
        try:
            stats = await workload.run(duration, on_tick=tick)
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    return stats, chaos.results() if chaos is not None else []


def judge(run_dir: Path, outcomes: list[Any], *, quiet: bool, junit: str | None = None) -> int:
    """Analyze the run, print the verdict table and the report's path; return the exit code
    of the run's status (as printed).

    The analysis runs in a fresh process (`weeble analyze`): this one has held thousands of
    gRPC channels and threads, and Spark's JVM, forked from it, did not survive that at scale
    (JAVA_GATEWAY_EXITED after gRPC's "skipping fork() handlers")."""
    import subprocess

    from weeble.chaos.verdict import print_verdict, run_passes, run_status, verdict_rows
    from weeble.check.status import BAD_INPUT, exit_code
    from weeble.commands import UsageError
    from weeble.trace.schema import ANALYSIS_DIR

    command = [sys.executable, "-m", "weeble.cli", "analyze", str(run_dir),
               *(["--quiet"] if quiet else [])]
    # its progress goes to stderr; its table is replaced by the one below (with the chaos
    # evidence of each fault)
    done = subprocess.run(command, stdout=subprocess.DEVNULL, check=False)
    summary = run_dir / ANALYSIS_DIR / "summary.json"
    if done.returncode == BAD_INPUT or not summary.exists():
        raise UsageError(f"analysis of {run_dir} failed (exit status {done.returncode}); "
                         f"run `weeble analyze {run_dir}` to see why")
    analysis = json.loads(summary.read_text())
    rows = verdict_rows(outcomes, analysis)
    passed = run_passes(rows, analysis)
    if junit:
        from weeble.commands.analyze import write_summary_junit

        # a fault the chaos evidence does not show taking effect fails its episode's case
        write_summary_junit(junit, analysis, not_effective={
            r.fault_id: r.note or ("no evidence that it did" if r.took_effect is None
                                   else "its evidence says it did not")
            for r in rows if r.passed is False and r.took_effect is not True})
    if analysis.get("report"):
        from weeble.commands.analyze import report_line

        print(report_line(analysis["report"]))
    print_verdict(rows, passed, analysis["verdict"].get("reasons", []),
                  measured_from=analysis["verdict"].get("stabilization_measured_from"),
                  reconfigurations=(analysis.get("reconfigurations") or {}).get(
                      "operations", []),
                  status=analysis["verdict"].get("status"))  # the verdict, last
    # the printed status: a fault that did not take effect fails a run the analysis passes
    return exit_code(run_status(passed, analysis["verdict"].get("status")))
