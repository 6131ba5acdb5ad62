"""Links in user space, a network part: a link is cut and shaped at both ends through admin, in
the brokers' own link layer (`user-space` in the evidence), since this kernel has no netem
(DESIGN.md, "Network emulation"). The local backend's links are all such, and so is its whole
network (on loopback every broker reaches every other: a link is the neighbour entry); on
Mininet and Docker the links a reconfiguration makes over the shared peer network are, and on
Kubernetes every link's shaping.

What was set is kept, to be put back when a broker restarts (a cut cable stays cut).
"""

from __future__ import annotations

from typing import Protocol

from weeble.orchestrator.backend import (
    BackendError,
    BrokerAddress,
    LinkControl,
    LinkShapeChange,
    LinkState,
)
from weeble.orchestrator.backends.admin import AdminCalls
from weeble.proto.v1 import admin_pb2
from weeble.runtime.config import BrokerConfig
from weeble.runtime.linkshaper import LinkShape


class Ends(Protocol):
    """What the part asks of its backend: the brokers' configs and addresses, whether one
    runs, admin access, and the run's neighbour entries (the link set a restart uses)."""

    admin: AdminCalls

    def config(self, broker_id: str) -> BrokerConfig: ...

    def address(self, broker_id: str) -> BrokerAddress: ...

    def alive(self, broker_id: str) -> bool: ...

    def enter_link(self, a: str, b: str) -> None: ...

    def drop_link(self, a: str, b: str) -> None: ...

    def entered_links(self) -> list[tuple[str, str]]: ...


class UserSpaceLinks(LinkControl):
    """The brokers' link layer as a network: cut, heal, shape and read a link at its ends
    (the backend's brokers, their configs, admin access and liveness)."""

    def __init__(self, backend: Ends) -> None:
        self.backend = backend
        self.cuts: set[frozenset[str]] = set()
        self.shapes: dict[tuple[str, str], LinkShape] = {}  # (from, to) -> current shape

    # ---- the network of the local backend: a link is its neighbour entries ---------------

    def add(self, a: str, b: str) -> None:
        self.backend.enter_link(a, b)

    def remove(self, a: str, b: str) -> None:
        self.backend.drop_link(a, b)

    def links(self) -> list[tuple[str, str]]:
        return self.backend.entered_links()

    def peer_address(self, broker_id: str, neighbor: str) -> str:
        # one loopback address per broker: its neighbours dial the address clients use
        self.backend.address(neighbor)
        return self.backend.address(broker_id).listen

    @property
    def reconfigurable(self) -> bool:
        return True  # on loopback every broker reaches every other

    def book_address(self, broker_id: str) -> str:
        return self.backend.address(broker_id).listen

    # ---- cut, heal, shape, read -----------------------------------------------------------

    def ends(self, a: str, b: str) -> list[tuple[str, str]]:
        """Both directions of link a-b, at the ends that are running."""
        for x, y in ((a, b), (b, a)):
            if y not in self.backend.config(x).neighbors:
                raise BackendError(f"no link {a}-{b}: {y} is not a neighbour of {x}")
        return [(x, y) for x, y in ((a, b), (b, a)) if self.backend.alive(x)]

    def cut(self, a: str, b: str) -> None:
        # Cut at both ends: each end drops what it would send and what it receives, so the
        # link stays cut even while one end restarts.
        self.cuts.add(frozenset((a, b)))
        for x, y in self.ends(a, b):
            self.backend.admin.call(x, "CutLink", admin_pb2.LinkRequest(neighbor=y))

    def heal(self, a: str, b: str) -> None:
        self.cuts.discard(frozenset((a, b)))
        for x, y in self.ends(a, b):
            self.backend.admin.call(x, "HealLink", admin_pb2.LinkRequest(neighbor=y))

    def shape(self, a: str, b: str, change: LinkShapeChange, *, both_ways: bool = True) -> None:
        ends = self.ends(a, b)
        for x, y in ends if both_ways else [e for e in ends if e == (a, b)]:
            reply = self.backend.admin.call(
                x, "SetLink", admin_pb2.SetLinkRequest(neighbor=y, **change.fields()))
            s = reply.link.shape
            self.shapes[x, y] = LinkShape(s.delay_ms, s.jitter_ms, s.loss, s.duplicate,
                                          s.rate_bps, s.corrupt)

    def is_cut(self, a: str, b: str) -> bool:
        return frozenset((a, b)) in self.cuts

    def state(self, a: str, b: str) -> LinkState:
        """Each running end's own word on the link (Snapshot): "cut" at every running end."""
        bk = self.backend
        ends: dict[str, str] = {}
        for x, y in ((a, b), (b, a)):
            if y not in bk.config(x).neighbors:
                raise BackendError(f"no link {a}-{b}: {y} is not a neighbour of {x}")
            if not bk.alive(x):
                ends[x] = "not running"
                continue
            reply = bk.admin.call(x, "Snapshot", admin_pb2.SnapshotRequest())
            ends[x] = next((ls.state for ls in reply.links if ls.neighbor == y), "absent")
        running = [s for s in ends.values() if s != "not running"]
        cut = all(s == "cut" for s in running) if running else self.is_cut(a, b)
        return LinkState(a, b, cut=cut, mechanism="user-space", ends=ends)

    def forget(self, a: str, b: str | None = None) -> None:
        """The link a-b removed (b None: every link of broker a)."""
        if b is not None:
            self.cuts.discard(frozenset((a, b)))
            self.shapes.pop((a, b), None)
            self.shapes.pop((b, a), None)
            return
        self.cuts = {k for k in self.cuts if a not in k}
        self.shapes = {k: v for k, v in self.shapes.items() if a not in k}

    def shapes_from(self, broker_id: str) -> dict[str, LinkShape]:
        """The shapes set on `broker_id`'s side of its links: neighbour -> shape."""
        return {to: shape for (frm, to), shape in self.shapes.items() if frm == broker_id}

    def cut_again(self, broker_id: str) -> None:
        """A restarted broker: its links that were cut, cut again at its end."""
        for cut in self.cuts:
            if broker_id in cut:
                (other,) = cut - {broker_id}
                self.backend.admin.call(broker_id, "CutLink",
                                        admin_pb2.LinkRequest(neighbor=other))
