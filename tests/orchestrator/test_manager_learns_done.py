"""The live manager changes its tree as soon as it reads a broker's word that an exchange is
done (issue 28): it used to change it when it finished the operation, after holding the record
for the other brokers' sends that count for it (`LiveNetwork.hold`, 0.5 s) on top of a trace
flush, and a broker that crashed in between restarted with the tree from before the exchange.

No broker processes: a testbed stand-in whose admin calls answer at once, and a trace file
written by hand with the initiator's `done`."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from weeble.core.events import Event, StartExchange
from weeble.core.reconfig.plan import ExchangeLink, Tree
from weeble.orchestrator.reconfigure import LiveReconfigurator

# b0 the root, b1 and b2 its children; the exchange b0-b2 for b1-b2 (cycle b1 b0 b2: b1 initiates)
BEFORE = Tree.of([("b0", "b1"), ("b0", "b2")])
AFTER = Tree.of([("b0", "b1"), ("b1", "b2")])


class _Admin:
    def __init__(self, broker: str, asked: list[tuple[str, Event]]) -> None:
        self.broker, self.asked = broker, asked

    async def manage_event(self, event: Event) -> dict[str, Any]:
        self.asked.append((self.broker, event))
        return {"traces": []}

    async def close(self) -> None:
        pass


class _Bed:
    """What the live manager asks of a testbed (reconfigure.Bed), without processes."""

    root = "b0"

    def __init__(self, trace_dir: Path) -> None:
        self.trace_dir = trace_dir
        self.asked: list[tuple[str, Event]] = []
        self.trees: list[Tree] = []  # each tree the manager recorded, in order

    @property
    def brokers(self) -> list[str]:
        return ["b0", "b1", "b2"]

    def tree(self) -> Tree:
        return BEFORE

    def admin(self, broker_id: str, timeout: float = 10.0) -> _Admin:
        return _Admin(broker_id, self.asked)

    def trace_file(self, broker_id: str) -> Path | None:
        return self.trace_dir / f"{broker_id}.jsonl"

    def tree_changed(self, tree: Tree) -> None:
        self.trees.append(tree)

    def settings(self) -> dict[str, Any]:
        return {}


async def _until(cond: Any, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"not within {timeout:g} s: {what}"
        await asyncio.sleep(0.01)


def test_the_tree_changes_when_the_initiators_done_is_read_not_when_the_record_finishes(
        tmp_path: Path) -> None:
    bed = _Bed(tmp_path)

    async def main() -> tuple[str, list[Tree], Tree, str, list[Tree]]:
        async with LiveReconfigurator(bed) as live:  # type: ignore[arg-type]
            assert live.net is not None and live.manager is not None
            # the record is held much longer than the test waits: its finish cannot come first
            live.net.hold = 3600.0
            record = live.manager.start(live.now(), ExchangeLink(remove=("b0", "b2"),
                                                                 add=("b1", "b2")))
            await _until(lambda: bed.asked, "the StartExchange reached the initiator")
            (initiator, start), = bed.asked
            assert isinstance(start, StartExchange) and initiator == start.path[0] == "b1"
            with (tmp_path / "b1.jsonl").open("a") as f:  # what the initiator's trace says
                f.write(json.dumps({"v": 2, "t": time.time_ns(), "node": "b1",
                                    "kind": "reconfig", "rid": record.rid,
                                    "phase": "done"}) + "\n")
            await _until(lambda: bed.trees, "the manager recorded a tree")
            early = (record.outcome, list(bed.trees), live.manager.tree)
            # the record finishes once held long enough: the tree is not recorded twice
            live.net._held = type(live.net._held)(
                (0.0, broker, r) for _, broker, r in live.net._held)
            await live.wait(record, timeout=10)
            return (*early, record.outcome, list(bed.trees))

    outcome_then, trees_then, manager_tree, outcome, trees = asyncio.run(main())
    assert outcome_then == "running"  # still held for its coordination messages ...
    assert trees_then == [AFTER] and manager_tree == AFTER  # ... but the tree is the new one
    assert outcome == "done" and trees == [AFTER]
