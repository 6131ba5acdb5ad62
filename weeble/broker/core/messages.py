"""What brokers send each other over a link, and what a publisher publishes.

One link carries one FIFO stream of these messages. `tag` is the table/color a control message
belongs to: always 0 for the leased algorithms, the rebuild bit a_B under the periodic-rebuild
wrapper (thesis §3.4.1), later the color c_new of the 3-color scheme.

Link messages are plain slotted dataclasses for speed (see events.py); treat them as immutable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from weeble.broker.core.filters import Filter, Value


@dataclass(slots=True)
class Notification:
    """A published notification; (publisher, seq) identifies it across the whole system.

    `attributes` is a plain dict for matching speed; treat it as read-only (not hashable).
    """

    publisher: str
    seq: int
    attributes: Mapping[str, Value]
    published_at: float = 0.0

    @property
    def id(self) -> str:
        return f"{self.publisher}#{self.seq}"


@dataclass(slots=True)
class Sub:
    """A subscription or a refresh of it (SC-1): a refresh carries the same sub_id."""

    sub_id: str
    filter: Filter
    tag: int = 0


@dataclass(slots=True)
class Unsub:
    """An unsubscription (SC-3); the filter travels along so brokers can count identical entries."""

    sub_id: str
    filter: Filter
    tag: int = 0


@dataclass(slots=True)
class Notify:
    notification: Notification


@dataclass(slots=True)
class Switch:
    """Periodic-rebuild wrapper (A5/A6): from now on, rebuild table `tag`."""

    tag: int


Message = Sub | Unsub | Notify | Switch
