"""`weeble reconfigure [--run RUN] OPERATION ...`: reshape a running testbed's broker tree.

    weeble reconfigure exchange b1-b3 b2-b3        # remove link b1-b3, add b2-b3 (4.4)
    weeble reconfigure add-leaf b7 b5              # a new broker process b7, a leaf of b5
    weeble reconfigure remove-leaf b6              # b6 leaves the tree, then its process stops
    weeble reconfigure insert b7 b1-b3             # b7 joins on the link b1-b3 (two steps)
    weeble reconfigure remove b2 [--hub b5]        # an inner broker leaves (exchanges, leaf)
    weeble reconfigure move-to b0-b1 b1-b2 ...     # to a target tree (D(T1,T2) exchanges)

Each operation is carried out by the run's live manager (weeble/orchestrator/reconfigure.py:
the coordinated link exchange, or the 3-colour scheme when the scenario's overlay is coloured)
while whatever traffic flows goes on; progress is printed as each step starts and ends, and
every phase is traced with its reconfiguration id (RUN/trace/reconfigure.jsonl and the brokers'
`reconfig` records), so `weeble check RUN` / `weeble analyze RUN` judge each one (R15).
Exit status 0 when every step is done, 1 when one failed, 2 on a user error.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

OPERATIONS = ("exchange", "add-leaf", "remove-leaf", "insert", "remove", "move-to")


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "reconfigure",
        help="reshape a running testbed's broker tree (link exchange, leaf add/remove, ...)",
        description="Reshape the broker tree of a running testbed (`weeble up`) under traffic:"
                    " exchange REMOVE ADD (links as a-b), add-leaf NEW ATTACH, remove-leaf"
                    " LEAF, insert NEW U-V, remove BROKER [--hub H], move-to LINK ... (a target"
                    " tree). Prints each step as it starts and ends; exit status 1 if one"
                    " failed.",
    )
    p.add_argument("operation", choices=OPERATIONS)
    p.add_argument("args", nargs="+", metavar="ARG", help="the operation's brokers and links")
    p.add_argument("--run", help="run id or run directory (default: the newest run that is up)")
    p.add_argument("--runs-dir", default="runs", metavar="DIR")
    p.add_argument("--hub", help="remove: the neighbour that takes the broker's other links")
    p.add_argument("--timeout", type=float, default=120.0, metavar="S",
                   help="give up waiting for one step after S seconds (default 120)")
    p.set_defaults(handler=run)


def link(text: str) -> tuple[str, str]:
    from weeble.commands import UsageError

    a, sep, b = text.partition("-")
    if not sep or not a or not b or "-" in b:
        raise UsageError(f"{text!r}: a link is written a-b (two broker ids), e.g. b1-b3")
    return a, b


def operations(name: str, args: list[str], tree: Any, hub: str | None) -> list[Any]:
    """The elementary operations (core/reconfig/plan.py) the command line asks for."""
    from weeble.commands import UsageError
    from weeble.core.reconfig.plan import (
        AddLeaf,
        ExchangeLink,
        RemoveLeaf,
        Tree,
        edge,
        insert_inner,
        plan,
        remove_inner,
    )

    need = {"exchange": 2, "add-leaf": 2, "remove-leaf": 1, "insert": 2, "remove": 1}
    if name in need and len(args) != need[name]:
        raise UsageError(f"{name}: takes {need[name]} argument(s), got {len(args)}: {args}")
    if name == "exchange":
        return [ExchangeLink(remove=edge(*link(args[0])), add=link(args[1]))]
    if name == "add-leaf":
        return [AddLeaf(args[0], args[1])]
    if name == "remove-leaf":
        return [RemoveLeaf(args[0])]
    if name == "insert":
        return insert_inner(tree, args[0], edge(*link(args[1])))
    if name == "remove":
        return remove_inner(tree, args[0], hub)
    return plan(tree, Tree.of([link(a) for a in args]))


def run(args: argparse.Namespace) -> int:
    from weeble.commands import UsageError
    from weeble.core.reconfig.plan import PlanError
    from weeble.orchestrator.local import signals_raise
    from weeble.orchestrator.testbed import Testbed

    bed = Testbed.attach(args.run, runs_dir=args.runs_dir, active=args.run is None)
    if bed.state != "up":
        raise UsageError(f"run {bed.run_id} is {bed.state}, not up (start one with `weeble up`)")
    try:
        ops = operations(args.operation, args.args, bed.tree(), args.hub)
    except PlanError as e:
        raise UsageError(f"{e} (run {bed.run_id})") from None

    def say(msg: str) -> None:
        print(f"  {msg}", file=sys.stderr)

    print(f"reconfigure run {bed.run_id}: {len(ops)} step(s)", file=sys.stderr)
    with signals_raise():
        try:
            records = asyncio.run(_carry_out(bed, ops, say, args.timeout))
        except PlanError as e:
            raise UsageError(f"{e} (run {bed.run_id})") from None
        finally:
            bed.detach()  # brokers it started (a new leaf) keep running, like `weeble up`'s
            bed.backend.close()
    for r in records:
        took = f"{r.duration:.3f} s" if r.duration is not None else "-"
        print(f"{r.rid}\t{r.outcome}\t{took}\t{_op(r.op)}" + (f"\t{r.why}" if r.why else ""))
    print(f"tree: {' '.join(f'{a}-{b}' for a, b in sorted(bed.tree().edges))}")
    return 0 if all(r.outcome == "done" for r in records) else 1


async def _carry_out(bed: Any, ops: list[Any], say: Any, timeout: float) -> list[Any]:
    records = []
    async with bed.reconfigurer(on_event=say) as manager:
        for op in ops:
            record = await manager.reconfigure(op, timeout=timeout)
            records.append(record)
            if record.outcome != "done":
                break  # the next step was planned on the tree this one would have made
    return records


def _op(op: Any) -> str:
    from weeble.sim.reconfigure import describe

    return describe(op)
