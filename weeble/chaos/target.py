"""What a fault acts on: the Target protocol, with two implementations.

- the simulator's Target (weeble/sim/target.py): engine calls in virtual time;
- the live Target (weeble/chaos/live.py): the orchestrator's Backend interface for processes and
  links, the brokers' admin API for their state, the client library for clients.

Each fault kind is implemented once, in actions.py, against this protocol; the runner
(runner.py) schedules an experiment's injections on a Target's clock. A Target reports what the
system says after each call (core snapshots, link and process states): that is the evidence,
never an assumption. A call that cannot be carried out raises TargetError (or an exception of
the target's transport) with a message naming the broker or link.

Times are seconds on the experiment's clock (0 = its start). Timestamps of trace records are the
target's business (virtual seconds in the simulator, wall-clock ns live).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

from weeble.core.messages import Message
from weeble.core.rom import Params, Rom
from weeble.model.selectors import Tree


class TargetError(Exception):
    """A call the target could not carry out (a broker that is down, a link it cannot reach)."""


class Target(Protocol):
    params: Params
    kind: str  # "sim", or the live backend's name ("local", ...)

    @property
    def tree(self) -> Tree:
        """The broker tree as it is now (it follows the reconfigurations): what a fault's
        selector is resolved against when the fault strikes."""
        ...

    # ---- the experiment's clock -------------------------------------------------------------

    def elapsed(self) -> float:
        """Seconds since the experiment started."""
        ...

    def sleep_until(self, t: float) -> Awaitable[bool]:
        """Wait until `t` s after the start; False (at once) if the experiment is stopping."""
        ...

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` beside the caller, on the same clock."""
        ...

    def record(self, kind: str, at: float, fields: dict[str, Any]) -> None:
        """Append a fault record (fault_begin, fault_end) stamped `at` s after the start."""
        ...

    def wait_phase(self, rid: str, phase: str, broker: str | None) -> Awaitable[float | None]:
        """Wait until reconfiguration `rid` reaches `phase` (the manager's `reconfiguration`
        record, or a broker's `reconfig` record, at `broker` if given): the time it did, s after
        the start; None if the experiment stops first. A phase already past counts."""
        ...

    # ---- brokers ----------------------------------------------------------------------------

    def rom(self, broker: str) -> Rom: ...

    async def snapshot(self, broker: str) -> dict[str, Any]:
        """The broker's core snapshot (`Broker.snapshot()`)."""
        ...

    async def corrupt(self, broker: str, *, field: str, value: Any, args: dict[str, Any],
                      fault_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """Apply the core's corruption API; (core snapshot before, after)."""
        ...

    async def inject(self, src: str, dst: str, message: Message,
                     fault_id: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, int]]:
        """`message` arrives at `dst` as if `src` sent it; (snapshot before, after, effects by
        kind: how many sends, deliveries, ... the core produced)."""
        ...

    async def kill(self, broker: str) -> dict[str, Any]:
        """Stop the broker at once (no drain, RAM lost); evidence of its state afterwards."""
        ...

    async def restart(self, broker: str) -> dict[str, Any]:
        """Start a stopped broker again: same ROM, empty RAM; evidence."""
        ...

    async def pause(self, broker: str, duration: float | None) -> dict[str, Any]:
        """Freeze the broker (alive, answering nothing) for up to `duration` s; evidence."""
        ...

    async def resume(self, broker: str) -> dict[str, Any]: ...

    def is_paused(self, broker: str) -> bool: ...

    # ---- links ------------------------------------------------------------------------------

    async def link_shape(self, a: str, b: str) -> dict[str, float]:
        """The shaping of direction a -> b (delay_ms, jitter_ms, loss, duplicate, corrupt)."""
        ...

    async def shape(self, a: str, b: str, change: dict[str, float]) -> dict[str, float]:
        """Change the shaping of direction a -> b; the shaping a reports afterwards."""
        ...

    async def cut(self, a: str, b: str, cut: bool) -> tuple[bool, dict[str, Any]]:
        """Cut (or heal) link a-b both ways; (is it cut now, evidence of its state)."""
        ...

    # ---- clients ----------------------------------------------------------------------------

    async def subscribe_client(self, client: str, broker: str, filter_text: str) -> Any:
        """A new client subscribes at `broker` and refreshes every ρ; its handle."""
        ...

    async def crash_client(self, handle: Any) -> dict[str, Any]:
        """The client stops refreshing without unsubscribing (F12); evidence."""
        ...

    def subscribers(self) -> list[str]:
        """The workload's clients with a live subscription, in the order they subscribed."""
        ...

    async def crash_subscriber(self, client: str) -> dict[str, Any]:
        """A workload client crashes (F12): every live subscription of it goes silent."""
        ...


@dataclass
class Step:
    """What one action did, as the target reports it."""

    targets: list[str]
    took_effect: bool
    evidence: dict[str, Any]
    error: str | None = None
    links: list[str] | None = None
    # A lasting fault: how to end it (the end's own Step)
    end: Callable[[], Awaitable[Step]] | None = None
    at: float | None = None  # when the fault struck (s), if not when the action began
    # what a heal or restart undoes (link keys, brokers): how it closes a cut or crash that
    # had no planned end
    undoes: set[str] = field(default_factory=set)
    fields: dict[str, Any] = field(default_factory=dict)  # more ids for the trace records
