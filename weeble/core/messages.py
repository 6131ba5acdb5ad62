"""What brokers send each other, and what a publisher publishes.

Two families, each message owned by the layer that handles it:
- routing messages (layer `routing`): notifications, (un)subscriptions, (un)advertisements and
  the rebuild switch. `tag` is the table a control message belongs to: always 0 for the leased
  algorithms, the rebuild bit a_B under the periodic-rebuild wrapper (thesis §3.4.1), later the
  colour c_new of the 3-colour scheme. `gray` is the message colour of the coordinated link
  exchange (thesis 4.4.2): which of the removed link r (black) and the added link a (gray) it
  may cross; it is meaningful only between brokers of one reconfiguration cycle.
- coordination messages (layer `reconfig`): lock, begin, relayed, reroute, separator, end,
  unlock of the coordinated link exchange, each with its reconfiguration id (spec ch4
  §3.11, fix D4), and bye of a leaf removal (4.2);
- recolor messages (layer `recolor`, the 3-colour scheme of 4.5): recolor, ack, the joinTree
  walk (ask, place) and reconfiguration requests for the root.

One link carries one FIFO stream of these messages. Link messages are plain slotted dataclasses
for speed (see events.py; the ones made per hop or per request have a hand-written `__init__`,
native when compiled); treat them as immutable: a broker forwards the object it received,
so a copy is made whenever a field (the colour) has to differ on one outgoing link.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from weeble.core.filters import Filter, IndexKey, Value
from weeble.core.optimize.messages import Broadcast, Propose
from weeble.core.overlay.skipring.messages import SkipRingMessage
from weeble.core.sketch.messages import AntiEntropyMessage


@dataclass(slots=True)
class Notification:
    """A published notification; (publisher, seq) identifies it across the whole system.

    `attributes` is a plain dict for matching speed; treat it as read-only (not hashable).
    """

    publisher: str
    seq: int
    attributes: Mapping[str, Value]
    published_at: float = 0.0
    # The index keys of `attributes` (`filters.notification_index_keys`), computed by the first
    # broker that routes the notification and reused at every later hop (the same object
    # travels on; attributes never change). Not part of its identity, value or wire form.
    index_keys: list[IndexKey] | None = field(default=None, init=False, repr=False,
                                              compare=False)
    # Its ids and publication time as JSON in a trace record, from the opening quote of `nid`
    # to the value of `published_at`: encoded by a traced broker for its `publish` record and
    # reused by its `deliver` records (`weeble.trace.columns`). Not part of its identity, value
    # or wire form.
    trace_ids: bytes | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def id(self) -> str:
        return f"{self.publisher}#{self.seq}"

    def __init__(self, publisher: str, seq: int, attributes: Mapping[str, Value],
                 published_at: float = 0.0) -> None:
        self.publisher = publisher
        self.seq = seq
        self.attributes = attributes
        self.published_at = published_at
        self.index_keys = None
        self.trace_ids = None


# ---- routing messages -----------------------------------------------------------------------


@dataclass(slots=True)
class Sub:
    """A subscription or a refresh of it (SC-1): a refresh carries the same sub_id."""

    sub_id: str
    filter: Filter
    tag: int = 0
    gray: bool = False

    def __init__(self, sub_id: str, filter: Filter, tag: int = 0, gray: bool = False) -> None:
        self.sub_id = sub_id
        self.filter = filter
        self.tag = tag
        self.gray = gray


@dataclass(slots=True)
class Unsub:
    """An unsubscription (SC-3); the filter travels along so brokers can count identical entries."""

    sub_id: str
    filter: Filter
    tag: int = 0
    gray: bool = False

    def __init__(self, sub_id: str, filter: Filter, tag: int = 0, gray: bool = False) -> None:
        self.sub_id = sub_id
        self.filter = filter
        self.tag = tag
        self.gray = gray


@dataclass(slots=True)
class Adv:
    """An advertisement or its refresh (thesis §3.4.2): a publisher may publish within `filter`."""

    adv_id: str
    filter: Filter
    tag: int = 0
    gray: bool = False


@dataclass(slots=True)
class Unadv:
    """An unadvertisement: handled like an unsubscription, on the advertisement tables."""

    adv_id: str
    filter: Filter
    tag: int = 0
    gray: bool = False


@dataclass(slots=True)
class Notify:
    notification: Notification
    gray: bool = False
    # 3-colour scheme (4.5): the publisher broker's c_cur; every hop routes the notification
    # with that colour's pointers and table. Unused (0) on a static overlay.
    color: int = 0

    def __init__(self, notification: Notification, gray: bool = False, color: int = 0) -> None:
        self.notification = notification
        self.gray = gray
        self.color = color


@dataclass(slots=True)
class Switch:
    """Periodic-rebuild wrapper (A5/A6): from now on, rebuild table `tag`."""

    tag: int


Control = Sub | Unsub | Adv | Unadv  # what builds routing tables
CONTROL = (Sub, Unsub, Adv, Unadv)

# ---- coordination messages of the link exchange (thesis 4.4.2, spec ch4 §3.4) ------------


@dataclass(slots=True)
class Lock:
    """Locks every broker of the cycle `path` = ⟨B1 … Bn⟩ for removing `edge` = (Br1, Br2)."""

    rid: str
    path: tuple[str, ...]
    edge: tuple[str, str]
    # A bounced lock says why (ours): "busy" (another reconfiguration holds a broker: retry)
    # or "path" (the path is no longer a tree path: the manager must plan again).
    refused: str = ""


@dataclass(slots=True)
class Begin:
    """From the initiator B1 to Br1 and Br2 once the whole cycle is locked."""

    rid: str


@dataclass(slots=True)
class Relayed:
    """An (un)subscription or (un)advertisement an r-endpoint relays out of band to the
    a-endpoint of its side, which handles it as if it had arrived over a (A3, A7 step 3).

    `reroute`: one of the routes across r that Begin re-issues towards a (A3.4-10), as opposed
    to a client's (un)subscription that arrived over r while relaying (A7.7-9).

    `lease` (ours; the thesis's relay carries the filter only, 4.4.2 has no leasing): on a
    re-issued route under leasing whose entry had missed its refresh at the r-endpoint, the
    time to the overrun that removes it there (`Routing.lease`), so that the copy keeps flag 0
    (`Routing.keep_lease`) and a stale route does not win a fresh lease; None: a fresh lease.
    """

    rid: str
    message: Control
    reroute: bool = False
    lease: float | None = None


@dataclass(slots=True)
class Reroute:
    """A routing update of the exchange itself, between brokers of one cycle: a re-issued
    route across r on its way along the side, or the withdrawal of a route across r (A4.24-30).

    Ours: the thesis lets these travel as ordinary (un)subscriptions. They stay on the cycle
    (Cugola et al.'s observation, L4111-4126: contracted to one broker, the cycle's external
    behaviour does not change), so no broker off the cycle sees them: an ordinary withdrawal
    would reach brokers off the cycle and remove routes they still need.
    """

    rid: str
    message: Control


@dataclass(slots=True)
class Separator:
    """The graying wave and channel flush; `brokers` are the brokers known to be gray."""

    rid: str
    brokers: frozenset[str]
    relayed: bool = False  # the out-of-band first hop from an r-endpoint to its a-endpoint


@dataclass(slots=True)
class End:
    """From an r-endpoint to its a-endpoint: nothing more will be relayed to you."""

    rid: str


@dataclass(slots=True)
class Unlock:
    """Releases the locks hop by hop; every hop is answered by an unlock sent back.

    `flip` (ours, not the thesis's): the side this unlock wave runs along used to reach the
    root through r, so each of its brokers now has its parent towards the a-endpoint.
    """

    rid: str
    flip: bool = False


@dataclass(slots=True)
class Bye:
    """A leaf leaves (RemoveLeaf, 4.2): withdraw everything it contributed, drop the link."""


Coordination = Lock | Begin | Relayed | Reroute | Separator | End | Unlock | Bye
COORDINATION = (Lock, Begin, Relayed, Reroute, Separator, End, Unlock, Bye)

# ---- the recolor protocol of the 3-colour scheme (thesis 4.5, seed 001; layer `recolor`) -----

# A reconfiguration as the recolor messages carry it: per broker, its parent in the new tree
# (None: it leaves). Spec ch4 §5.6: the request lists per-broker pointer changes, so that every
# broker can apply the part that concerns it without knowing the tree.
Move = tuple[str, str | None]


@dataclass(slots=True)
class Recolor:
    """RECmsg (A9.7): the root's new colour and the reconfigurations of this round.

    `round` and `activating` are ours: the round number is for the trace only (no decision reads
    it); `activating` says the previous round carried reconfigurations, which become active with
    this one (the causal extension of 4.5.4 holds publications for one period from here).
    """

    color: int
    moves: tuple[Move, ...] = ()
    rids: tuple[str, ...] = ()
    round: int = 0
    activating: bool = False


@dataclass(slots=True)
class RecolorAck:
    """ACKmsg (A10.4): the child accepted the recolor (`color` for the trace only)."""

    color: int = 0


@dataclass(slots=True)
class AskPlace:
    """askForPlaceOrPointer() (A15) of a joining broker's walk from R down the c_new tree."""


@dataclass(slots=True)
class Place:
    """The answer: `pointer` = the asked broker itself (a place) or one of its children."""

    pointer: str


@dataclass(slots=True)
class Reconfigure:
    """A reconfiguration request for R (4.5.3 "sent to R"): a join, or a manager's request
    handed to a broker that is not the root."""

    rid: str
    moves: tuple[Move, ...]


Recoloring = Recolor | RecolorAck | AskPlace | Place | Reconfigure
RECOLORING = (Recolor, RecolorAck, AskPlace, Place, Reconfigure)

# Every message a link carries: the ones above, and those each other layer declares in its own
# module (the optimizer's, the sketches', the skip ring's of seed 003, which travel the same links).
Message = (Sub | Unsub | Adv | Unadv | Notify | Switch | Coordination | Recoloring | Broadcast
           | Propose | AntiEntropyMessage | SkipRingMessage)
