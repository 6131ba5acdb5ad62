"""`weeble status [RUN]`: the brokers of a run: process, address, and what their admin says."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "status",
        help="show the brokers of a live run",
        description="One line per broker of RUN: pid, address, alive, routing-table size and"
                    " link states, from each broker's admin snapshot. Without RUN, the newest"
                    " run that started; runs that failed to start are skipped, and named on"
                    " stderr.",
    )
    p.add_argument("run", nargs="?",
                   help="run id or run directory (default: the newest run that started)")
    p.add_argument("--runs-dir", default="runs", metavar="DIR")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(handler=run)


async def _snapshots(bed: Any, alive: list[str]) -> dict[str, Any]:
    async def one(b: str) -> Any:
        try:
            async with bed.admin(b, timeout=3.0) as admin:
                return await admin.snapshot()
        except Exception as e:  # one unreachable broker must not hide the others
            return e

    replies = await asyncio.gather(*(one(b) for b in alive))
    return dict(zip(alive, replies, strict=True))


def rows(bed: Any) -> list[dict[str, Any]]:
    alive = [b for b in bed.brokers if bed.backend.alive(b)]
    snaps = asyncio.run(_snapshots(bed, alive)) if alive else {}
    out = []
    for b in bed.brokers:
        addr = bed.address(b)
        snap = snaps.get(b)
        row: dict[str, Any] = {"broker": b, "pid": bed.backend.handle(b), "address": addr.listen,
                               "admin": addr.admin, "alive": b in alive, "table": None,
                               "links": {}, "error": None}
        if isinstance(snap, dict):
            tables = (snap.get("core") or {}).get("tables") or []
            row["table"] = sum(len(t) for t in tables)
            row["links"] = {link["neighbor"]: link["state"] for link in snap.get("links", [])}
        elif snap is not None:
            details = getattr(snap, "details", None)
            row["error"] = str(details() if callable(details) else snap)
        out.append(row)
    return out


def attach(run: str | None, runs_dir: str) -> tuple[Any, list[tuple[str, str]]]:
    """The testbed of `run`, or of the newest run that started; the runs skipped on the way
    (run id, why): a run that failed to start has no brokers to show, and may lack their
    configuration files altogether."""
    from weeble.orchestrator.backend import BackendError
    from weeble.orchestrator.testbed import RunNotFound, Testbed, runs

    if run is not None:
        return Testbed.attach(run, runs_dir=runs_dir), []
    skipped: list[tuple[str, str]] = []
    for run_dir, data in runs(runs_dir):
        if data.get("state") == "failed":
            skipped.append((run_dir.name, "it failed to start"))
            continue
        try:
            return Testbed.attach(run_dir, runs_dir=runs_dir), skipped
        except BackendError as e:
            skipped.append((run_dir.name, str(e)))
    more = "; ".join(f"skipped run {name}: {why}" for name, why in skipped)
    raise RunNotFound(f"no run in {runs_dir}/ that started{f' ({more})' if more else ''};"
                      " start one with `weeble up SCENARIO`")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    bed, skipped = attach(args.run, args.runs_dir)
    for name, why in skipped:
        print(f"weeble: skipped run {name}: {why}", file=sys.stderr)
    try:
        table_rows = rows(bed)
    finally:
        bed.backend.close()
    if args.json:
        print(json.dumps({"run_id": bed.run_id, "state": bed.state, "brokers": table_rows,
                          "skipped": [{"run_id": n, "why": w} for n, w in skipped]},
                         indent=2))
        return 0
    table = Table(title=f"run {bed.run_id} ({bed.state})", caption=str(bed.run_dir))
    for col in ("broker", "pid", "address", "alive", "table", "links"):
        table.add_column(col, justify="right" if col in ("pid", "table") else "left")
    for r in table_rows:
        links = " ".join(f"{n}:{s}" for n, s in r["links"].items()) or (r["error"] or "-")
        table.add_row(r["broker"], r["pid"] or "-", r["address"],
                      "[green]yes[/]" if r["alive"] else "[red]no[/]",
                      "-" if r["table"] is None else str(r["table"]), links)
    Console(width=max(100, Console().width)).print(table)
    return 0
