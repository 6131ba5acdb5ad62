"""The broker state machine's interface: events in, effects out (`Broker.step(now, event)`).

Drivers (the simulator, the gRPC runtime) turn sockets, clients and clocks into events, and carry
out the effects. Nothing here does I/O.

Events and effects are plain (not frozen) slotted dataclasses: millions are made per simulated
second and a frozen dataclass costs three times as much to build. Treat them as immutable.
The ones made per hop or per client request write their `__init__` by hand (the same signature
as the generated one): compiled with mypyc, a class's own `__init__` is native, while the one
`@dataclass` generates stays interpreted Python (~5 % of a compiled seed000 run). The
dataclass still gives the fields, `__eq__` and `__repr__`.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from dataclasses import dataclass, field
from typing import Any

from weeble.core.filters import Filter
from weeble.core.messages import Message, Notification

# ---- events ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Start:
    """First event of a broker's life (also after a restart): arms its timers."""


@dataclass(slots=True)
class Receive:
    """A message arrived from neighbour broker `neighbor`."""

    neighbor: str
    message: Message

    def __init__(self, neighbor: str, message: Message) -> None:
        self.neighbor = neighbor
        self.message = message


def network_id(client: str, sub_id: str) -> str:
    """The id under which the brokers hold a client's subscription (or advertisement).

    A client names its subscriptions uniquely among its own only (R1), so the access broker
    qualifies the id with its client, `<client>/<sub_id>`, before it enters a table or a
    message: routing, refresh, leases, unsubscription and merging then act per (client,
    sub_id) everywhere. An id already of that form (the simulator's `<client>/<k>`) is its own
    network id. Client ids hold no `/` (`valid_client`), so two clients never share one."""
    n = len(client)
    if sub_id.startswith(client) and sub_id[n:n + 1] == "/":
        return sub_id
    return f"{client}/{sub_id}"


def valid_client(client: str) -> str | None:
    """Why `client` cannot subscribe or advertise (a `/` would make `network_id` ambiguous:
    client `a/b`'s id `c` and client `a`'s id `b/c`), or None."""
    if "/" in client:
        return f"client id {client!r} contains '/' (it qualifies the client's sub ids)"
    return None


@dataclass(slots=True)
class ClientSubscribe:
    """A local client subscribes, or refreshes (SC-4) a subscription with the same sub_id."""

    client: str
    sub_id: str
    filter: Filter

    def __init__(self, client: str, sub_id: str, filter: Filter) -> None:
        self.client = client
        self.sub_id = sub_id
        self.filter = filter


@dataclass(slots=True)
class ClientUnsubscribe:
    client: str
    sub_id: str
    filter: Filter

    def __init__(self, client: str, sub_id: str, filter: Filter) -> None:
        self.client = client
        self.sub_id = sub_id
        self.filter = filter


@dataclass(slots=True)
class ClientAdvertise:
    """A local publisher advertises, or refreshes an advertisement (thesis §3.4.2)."""

    client: str
    adv_id: str
    filter: Filter


@dataclass(slots=True)
class ClientUnadvertise:
    client: str
    adv_id: str
    filter: Filter


@dataclass(slots=True)
class ClientPublish:
    client: str
    notification: Notification

    def __init__(self, client: str, notification: Notification) -> None:
        self.client = client
        self.notification = notification


@dataclass(slots=True)
class TimerFired:
    """A timer set by a SetTimer effect has come due."""

    timer: str

    def __init__(self, timer: str) -> None:
        self.timer = timer


@dataclass(slots=True)
class Corrupt:
    """A transient state fault: set RAM field `target` to `value` (see core.corruption)."""

    target: str
    value: Any = None
    args: dict[str, Any] = field(default_factory=dict)


# ---- management: reconfiguration requests (thesis 4.2, 4.4) ----------------------------------
# The thesis assumes managed reconfigurations: brokers have direct access to topology management
# (spec ch4 §0). These events are how the manager (an orchestrator, the simulator, a test)
# asks one broker to take part.


@dataclass(slots=True)
class StartExchange:
    """At the initiator B1 = path[0]: exchange link `remove` = (Br1, Br2) for a = (B1, Bn).

    `path` is the cycle ⟨B1 … Bn⟩: the tree path from B1 to Bn, which contains r. `seed` makes
    the random back-off before a retry reproducible (the core reads no global RNG).
    """

    rid: str
    path: tuple[str, ...]
    remove: tuple[str, str]
    seed: int = 0


@dataclass(slots=True)
class AddNeighbor:
    """A new overlay link to `neighbor` (AddLeaf at the attach point; the strawman's a).

    With `bootstrap` the broker sends the new neighbour what it needs of its tables (4.2.2:
    "only Ba's routing table has to be made consistent with B's").
    """

    neighbor: str
    bootstrap: bool = True


@dataclass(slots=True)
class RemoveNeighbor:
    """Drop the overlay link to `neighbor` (the strawman's r).

    With `withdraw`, first act as if `neighbor` had unsubscribed everything it had subscribed
    (the strawman of 4.4.1; what a departing leaf's Bye triggers).
    """

    neighbor: str
    withdraw: bool = True


@dataclass(slots=True)
class Leave:
    """RemoveLeaf (4.2.2): this leaf withdraws what it contributed and drops its link."""


@dataclass(slots=True)
class SetParent:
    """The manager's word on which neighbour is now the parent (None: this broker is the root)."""

    parent: str | None


@dataclass(slots=True)
class SubmitReconfig:
    """3-colour scheme (4.5.3): a reconfiguration for the root R, which carries it in its next
    recolor. `moves` are per-broker parent pointers of the new tree (None: the broker leaves);
    a broker other than R forwards the request to R."""

    rid: str
    moves: tuple[tuple[str, str | None], ...]


@dataclass(slots=True)
class LinkMeasured:
    """The round trip (s) the driver measured to `peer` (`Optimizer.measure_every`): the tree
    optimizer's link cost c(me, peer) from now on. An input like the clock: the core measures
    nothing itself."""

    peer: str
    rtt: float


@dataclass(slots=True)
class LinkDown:
    """The driver's word that the link to `neighbor` failed (its stream broke, a cut). Only the
    anti-entropy mode acts on it (seed 002 §5: the timer strategies)."""

    neighbor: str


@dataclass(slots=True)
class LinkUp:
    """The link to `neighbor` works again."""

    neighbor: str


Management = StartExchange | AddNeighbor | RemoveNeighbor | Leave | SetParent | SubmitReconfig

Event = (
    Start | Receive | ClientSubscribe | ClientUnsubscribe | ClientAdvertise | ClientUnadvertise
    | ClientPublish | TimerFired | Corrupt | Management | LinkMeasured | LinkDown | LinkUp
)

# ---- effects --------------------------------------------------------------------------------


@dataclass(slots=True)
class Send:
    neighbor: str
    message: Message

    def __init__(self, neighbor: str, message: Message) -> None:
        self.neighbor = neighbor
        self.message = message


@dataclass(slots=True)
class Deliver:
    """Hand a notification to local client `client` (at most once per notification and client)."""

    client: str
    notification: Notification

    def __init__(self, client: str, notification: Notification) -> None:
        self.client = client
        self.notification = notification


@dataclass(slots=True)
class SetTimer:
    """Fire TimerFired(timer) at time `at`; replaces any pending timer with the same name."""

    timer: str
    at: float

    def __init__(self, timer: str, at: float) -> None:
        self.timer = timer
        self.at = at


@dataclass(slots=True)
class Trace:
    """A trace record of something internal to the broker (expiry, table change, corruption)."""

    kind: str
    fields: dict[str, Any]

    def __init__(self, kind: str, fields: dict[str, Any]) -> None:
        self.kind = kind
        self.fields = fields


Effect = Send | Deliver | SetTimer | Trace


def not_a_neighbour(source: str) -> list[Effect]:
    """What a broker answers to what only a neighbour may send (a routing message, a link to
    drop), from `source`, which is not one: a garbage record, and nothing else happens."""
    return [Trace("garbage", {"from": source, "why": "not a neighbour"})]

# A layer's handler of one event type, handler(now, event) -> effects; the broker dispatches by
# type, so the event's parameter is as wide as the table it sits in.
Handler = Callable[[float, Any], list[Effect]]
# A layer's handler of one message type from a neighbour, receiver(now, sender, message).
Receiver = Callable[[float, str, Any], list[Effect]]


def from_neighbour(neighbors: Container[str], receiver: Receiver, now: float, source: str,
                   message: Any) -> list[Effect]:
    """A message only a neighbour may send (a routing or an anti-entropy message): `receiver`'s
    effects when `source` is one of `neighbors`, else `not_a_neighbour(source)` and nothing
    else: the check of the broker's dispatch, its anti-entropy stage and a locked exchange."""
    if source not in neighbors:
        return not_a_neighbour(source)
    return receiver(now, source, message)
