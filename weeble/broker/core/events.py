"""The broker state machine's interface: events in, effects out (`Broker.step(now, event)`).

Drivers (the simulator, the gRPC runtime) turn sockets, clients and clocks into events, and carry
out the effects. Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from weeble.broker.core.filters import Filter
from weeble.broker.core.messages import Message, Notification

# ---- events ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Start:
    """First event of a broker's life (also after a restart): arms its timers."""


@dataclass(frozen=True, slots=True)
class Receive:
    """A message arrived from neighbour broker `neighbor`."""

    neighbor: str
    message: Message


@dataclass(frozen=True, slots=True)
class ClientSubscribe:
    """A local client subscribes, or refreshes (SC-4) a subscription with the same sub_id."""

    client: str
    sub_id: str
    filter: Filter


@dataclass(frozen=True, slots=True)
class ClientUnsubscribe:
    client: str
    sub_id: str
    filter: Filter


@dataclass(frozen=True, slots=True)
class ClientPublish:
    client: str
    notification: Notification


@dataclass(frozen=True, slots=True)
class TimerFired:
    """A timer set by a SetTimer effect has come due."""

    timer: str


@dataclass(frozen=True, slots=True)
class Corrupt:
    """A transient state fault: set RAM field `target` to `value` (see core.corruption)."""

    target: str
    value: Any = None
    args: dict[str, Any] = field(default_factory=dict)


Event = Start | Receive | ClientSubscribe | ClientUnsubscribe | ClientPublish | TimerFired | Corrupt

# ---- effects --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Send:
    neighbor: str
    message: Message


@dataclass(frozen=True, slots=True)
class Deliver:
    """Hand a notification to local client `client` (at most once per notification and client)."""

    client: str
    notification: Notification


@dataclass(frozen=True, slots=True)
class SetTimer:
    """Fire TimerFired(timer) at time `at`; replaces any pending timer with the same name."""

    timer: str
    at: float


@dataclass(frozen=True, slots=True)
class Trace:
    """A trace record of something internal to the broker (expiry, table change, corruption)."""

    kind: str
    fields: dict[str, Any]


Effect = Send | Deliver | SetTimer | Trace
