"""The broker state machine's interface: events in, effects out (`Broker.step(now, event)`).

Drivers (the simulator, the gRPC runtime) turn sockets, clients and clocks into events, and carry
out the effects. Nothing here does I/O.

Events and effects are plain (not frozen) slotted dataclasses: millions are made per simulated
second and a frozen dataclass costs three times as much to build. Treat them as immutable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from weeble.broker.core.filters import Filter
from weeble.broker.core.messages import Message, Notification

# ---- events ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Start:
    """First event of a broker's life (also after a restart): arms its timers."""


@dataclass(slots=True)
class Receive:
    """A message arrived from neighbour broker `neighbor`."""

    neighbor: str
    message: Message


@dataclass(slots=True)
class ClientSubscribe:
    """A local client subscribes, or refreshes (SC-4) a subscription with the same sub_id."""

    client: str
    sub_id: str
    filter: Filter


@dataclass(slots=True)
class ClientUnsubscribe:
    client: str
    sub_id: str
    filter: Filter


@dataclass(slots=True)
class ClientPublish:
    client: str
    notification: Notification


@dataclass(slots=True)
class TimerFired:
    """A timer set by a SetTimer effect has come due."""

    timer: str


@dataclass(slots=True)
class Corrupt:
    """A transient state fault: set RAM field `target` to `value` (see core.corruption)."""

    target: str
    value: Any = None
    args: dict[str, Any] = field(default_factory=dict)


Event = Start | Receive | ClientSubscribe | ClientUnsubscribe | ClientPublish | TimerFired | Corrupt

# ---- effects --------------------------------------------------------------------------------


@dataclass(slots=True)
class Send:
    neighbor: str
    message: Message


@dataclass(slots=True)
class Deliver:
    """Hand a notification to local client `client` (at most once per notification and client)."""

    client: str
    notification: Notification


@dataclass(slots=True)
class SetTimer:
    """Fire TimerFired(timer) at time `at`; replaces any pending timer with the same name."""

    timer: str
    at: float


@dataclass(slots=True)
class Trace:
    """A trace record of something internal to the broker (expiry, table change, corruption)."""

    kind: str
    fields: dict[str, Any]


Effect = Send | Deliver | SetTimer | Trace
