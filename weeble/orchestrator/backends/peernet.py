"""Links made at run time on the backends with a network of their own (Mininet, Docker).

A reconfiguration links brokers that were not neighbours (the exchange's new link a, a new
leaf) and opens the exchange's out-of-band channels between brokers of a cycle (B1 to Br1,
Br2 to Bn); the optimizer decides such exchanges inside the brokers, with no word to the
orchestrator. A broker dials them from its address book (admin SetPeers), so the network must
let it reach any broker of the run. On these backends a run that reconfigures therefore gets a
*peer network* beside its links: one segment every broker is on (on Mininet a bridge in a
namespace of its own, on Docker a network with inter-container traffic on), whose address of
each broker is the one in every address book.

The links of the plan stay what they were (a veth pair, a Docker network of their own; cut
at the network layer). A link made at run time rides the peer network: its neighbours dial
each other's peer address, a restarted broker finds it in its config, and a cut of it is the
brokers' user-space cut at both ends (the local backend's mechanism, `user-space` in the
evidence), since the network between the two is shared with every other broker. Without a
peer network (a run that does not reconfigure) a link added at run time is a link of its own,
as before.

`PeerLinks` is the part Mininet and Docker share: where a broker is placed (a management
address of its own, `_placement`), the table of the network's own links (`_links`, `_link`)
and the address book; each backend puts a broker on its peer network (`_join_peers`) and is
assembled with its own network part, a `Wires` (`self.wires`: how a link of its own is made,
removed, cut, read and shaped); this class decides which kind a link is and answers the
Backend interface for both.
"""

from __future__ import annotations

import contextlib
from typing import Any, Protocol

from weeble.orchestrator.backend import (
    BackendError,
    BrokerAddress,
    LinkShapeChange,
    LinkState,
    Placement,
)
from weeble.orchestrator.local import LocalBackend


class Wires(Protocol):
    """The network part of a backend with a network of its own: the links it makes itself
    (a veth pair, a Docker network), each found in the backend's `_links` table."""

    def link(self, a: str, b: str) -> None: ...

    def unlink(self, a: str, b: str) -> None: ...

    def links(self, everything: bool = False) -> list[tuple[str, str]]:
        """The network's own links (`everything`: also those no longer in the overlay)."""
        ...

    def cut(self, a: str, b: str, status: str) -> None:
        """Take the link down (`status` "down") or up again, in the network."""
        ...

    def state(self, a: str, b: str) -> LinkState: ...

    def shape(self, a: str, b: str, change: LinkShapeChange, both_ways: bool) -> None: ...


class PeerLinks(LocalBackend):
    """A LocalBackend whose links are its network's (`wires`) or ride its peer network."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._peer_ip: dict[str, str] = {}  # broker -> its address on the peer network
        self._peer_links: set[frozenset[str]] = set()  # links made at run time over it
        self._peer_network = False  # planned with one (`Ports.peer_network`)
        self._idle_wires: set[frozenset[str]] = set()  # planned links a reconfiguration removed
        # the network's own links: each with its ends `a`, `b` and `ip` (broker -> its address
        # on it), and the backend's handle of it
        self._links: dict[frozenset[str], Any] = {}

    wires: Wires  # the backend's network part, set by its constructor

    # placement and the network's own links -------------------------------------------------

    def _placement(self, broker_id: str, ip: str) -> Placement:
        """A broker with a network namespace of its own, reached at its management address
        `ip`: links and clients on every interface (a link address and the management one),
        admin and metrics on the management address only."""
        listen, admin, metrics = self._ports  # type: ignore[attr-defined]
        reach = BrokerAddress(broker_id, f"{ip}:{listen}", f"{ip}:{admin}",
                              None if metrics is None else f"{ip}:{metrics}")
        self._reach[broker_id] = reach
        return Placement(f"0.0.0.0:{listen}", reach.admin, reach.metrics, reach)

    def _link(self, a: str, b: str) -> Any:
        entry = self._links.get(frozenset((a, b)))
        if entry is None:
            raise BackendError(f"no link {a}-{b} in this {self.name} run")
        return entry

    def _link_address(self, broker_id: str, neighbor: str) -> str:
        """Where `neighbor` dials `broker_id` over their link of the network's own."""
        return f"{self._link(broker_id, neighbor).ip[broker_id]}:{self._ports[0]}"  # type: ignore[attr-defined]

    # the address book ----------------------------------------------------------------------

    @property
    def reconfigurable(self) -> bool:
        return self._peer_network

    def book_address(self, broker_id: str) -> str:
        ip = self._peer_ip.get(broker_id)
        if ip is None:
            if not self._peer_network:
                raise BackendError(
                    f"the {self.name} backend: this run has no peer network (it was planned"
                    " without reconfiguration), so brokers cannot reach non-neighbours")
            raise BackendError(f"broker {broker_id}: not on this run's peer network")
        return f"{ip}:{self._ports[0]}"  # type: ignore[attr-defined]

    def _peer_link(self, a: str, b: str) -> bool:
        return frozenset((a, b)) in self._peer_links

    # the Backend interface, for both kinds of link -----------------------------------------

    def peer_address(self, broker_id: str, neighbor: str) -> str:
        if self._peer_link(broker_id, neighbor):
            return self.book_address(broker_id)
        return self._link_address(broker_id, neighbor)

    def add_link(self, a: str, b: str) -> None:
        key = frozenset((a, b))
        if key in self._idle_wires:  # a planned link linked again: it is still there
            self._idle_wires.discard(key)
            LocalBackend.add_link(self, a, b)
            return
        if key in self._peer_links or any(key == frozenset(e) for e in self.wires.links()):
            raise BackendError(f"link {a}-{b} exists already")
        if self._peer_network:
            for x in (a, b):
                self.book_address(x)  # both on the peer network, or say which is not
            self._peer_links.add(key)
        else:
            self.wires.link(a, b)
        LocalBackend.add_link(self, a, b)

    def remove_link(self, a: str, b: str) -> None:
        key = frozenset((a, b))
        if key in self._peer_links:
            LocalBackend.remove_link(self, a, b)
            self._peer_links.discard(key)
        elif self._peer_network:
            # a planned link a reconfiguration removed stays in the network, unused: the
            # brokers' session over it ends when they find it idle (tuning.link_idle_s), and
            # a later exchange that links the pair again dials it as before
            self._idle(a, b)
            LocalBackend.remove_link(self, a, b)
            self._idle_wires.add(key)
            for x, y in ((a, b), (b, a)):  # a restart of x still finds y there
                with contextlib.suppress(BackendError):  # (attached: addresses unknown here)
                    config = self._configs[x]
                    self._configs[x] = config.model_copy(
                        update={"peers": {**config.peers, y: self._link_address(y, x)}})
        else:
            self.wires.unlink(a, b)
            LocalBackend.remove_link(self, a, b)

    def _idle(self, a: str, b: str) -> None:
        """Raise BackendError unless a-b is a planned link in use."""
        if frozenset((a, b)) in self._idle_wires:
            raise BackendError(f"no link {a}-{b}: a reconfiguration removed it")

    def _remove_wires_of(self, broker_id: str) -> None:
        """A broker removed: the links of its own in the network go with it."""
        for a, b in [e for e in self.wires.links(everything=True) if broker_id in e]:
            self.wires.unlink(a, b)
            if frozenset((a, b)) in self._idle_wires:
                self._idle_wires.discard(frozenset((a, b)))
            else:
                LocalBackend.remove_link(self, a, b)

    def links(self) -> list[tuple[str, str]]:
        peer = [tuple(sorted(k)) for k in self._peer_links]
        wired = [e for e in self.wires.links() if frozenset(e) not in self._idle_wires]
        return sorted({*wired, *peer})  # type: ignore[arg-type]

    def cut_link(self, a: str, b: str) -> None:
        self._idle(a, b)
        if self._peer_link(a, b):
            self.user_links.cut(a, b)
        else:
            self.wires.cut(a, b, "down")

    def heal_link(self, a: str, b: str) -> None:
        self._idle(a, b)
        if self._peer_link(a, b):
            self.user_links.heal(a, b)
        else:
            self.wires.cut(a, b, "up")

    def link_state(self, a: str, b: str) -> LinkState:
        self._idle(a, b)
        if self._peer_link(a, b):
            return self.user_links.state(a, b)
        return self.wires.state(a, b)

    def shape_link(self, a: str, b: str, change: LinkShapeChange, *,
                   both_ways: bool = True) -> None:
        self._idle(a, b)
        if self._peer_link(a, b):  # a rate too: the brokers' shaper (the segment is shared)
            self.user_links.shape(a, b, change, both_ways=both_ways)
        else:
            self.wires.shape(a, b, change, both_ways)

    def _forget_peer(self, broker_id: str) -> None:
        """A broker removed: its peer links (their config entries go with the broker)."""
        self._peer_links = {k for k in self._peer_links if broker_id not in k}
        self._idle_wires = {k for k in self._idle_wires if broker_id not in k}
        self._peer_ip.pop(broker_id, None)

    def _peer_state(self) -> dict[str, Any]:
        return {"peer_network": self._peer_network, "peer_ip": dict(self._peer_ip),
                "peer_links": sorted(sorted(k) for k in self._peer_links),
                "idle_wires": sorted(sorted(k) for k in self._idle_wires)}

    def _load_peer_state(self, state: dict[str, Any]) -> None:
        self._peer_network = bool(state.get("peer_network"))
        self._peer_ip = dict(state.get("peer_ip") or {})
        self._peer_links = {frozenset(pair) for pair in state.get("peer_links") or []}
        self._idle_wires = {frozenset(pair) for pair in state.get("idle_wires") or []}
