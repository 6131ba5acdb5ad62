"""`weeble status [RUN]`: the brokers of a run: process, address, and what their admin says."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "status",
        help="show the brokers of a live run",
        description="One line per broker of RUN (default: the newest run): pid, address,"
                    " alive, routing-table size and link states, from each broker's admin"
                    " snapshot.",
    )
    p.add_argument("run", nargs="?", help="run id or run directory (default: the newest run)")
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


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from weeble.orchestrator.testbed import Testbed

    bed = Testbed.attach(args.run, runs_dir=args.runs_dir)
    try:
        table_rows = rows(bed)
    finally:
        bed.backend.close()
    if args.json:
        print(json.dumps({"run_id": bed.run_id, "state": bed.state, "brokers": table_rows},
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
