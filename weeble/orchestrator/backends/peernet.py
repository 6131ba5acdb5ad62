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

`PeerNetwork` is the network part Mininet and Docker compose (`backend.network`): where a
broker is placed (a management address of its own, `placement`), the table of the network's
own links (`wired`, `link`) and the address book; each backend puts a broker on its peer
network (`_join_peers`) and gives the part its own `Wires` (how a link of its own is made,
removed, cut, read and shaped); the part decides which kind a link is and answers for both.
"""

from __future__ import annotations

import contextlib
from typing import Any, Protocol

from weeble.orchestrator.backend import (
    BackendError,
    BrokerAddress,
    LinkControl,
    LinkShapeChange,
    LinkState,
    Placement,
)
from weeble.orchestrator.backends.userlinks import UserSpaceLinks
from weeble.runtime.config import BrokerConfig


class Wires(Protocol):
    """The links a backend with a network of its own makes itself (a veth pair, a Docker
    network), each found in its PeerNetwork's `wired` table."""

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


class Host(Protocol):
    """What the part asks of its backend (Mininet's, Docker's): its name and ports, where the
    orchestrator reaches each broker, the brokers' configs and their neighbour entries, and its
    user-space links (the links made over the peer network)."""

    name: str
    _ports: tuple[int, int, int | None]
    _reach: dict[str, BrokerAddress]
    _configs: dict[str, BrokerConfig]
    user_links: UserSpaceLinks

    def enter_link(self, a: str, b: str) -> None: ...

    def drop_link(self, a: str, b: str) -> None: ...


class PeerNetwork(LinkControl):
    """The network part of Mininet and Docker: a link is the network's own (`wires`) or, made
    at run time on a run with a peer network, rides it (cut and shaped in user space)."""

    def __init__(self, backend: Host, wires: Wires) -> None:
        self.backend = backend
        self.wires = wires
        self.peer_ip: dict[str, str] = {}  # broker -> its address on the peer network
        self.peer_links: set[frozenset[str]] = set()  # links made at run time over it
        self.peer_network = False  # planned with one (`Ports.peer_network`)
        self.idle_wires: set[frozenset[str]] = set()  # planned links a reconfiguration removed
        # the network's own links: each with its ends `a`, `b` and `ip` (broker -> its address
        # on it), and the backend's handle of it
        self.wired: dict[frozenset[str], Any] = {}

    # placement and the network's own links -------------------------------------------------

    def placement(self, broker_id: str, ip: str) -> Placement:
        """A broker with a network namespace of its own, reached at its management address
        `ip`: links and clients on every interface (a link address and the management one),
        admin and metrics on the management address only."""
        listen, admin, metrics = self.backend._ports
        reach = BrokerAddress(broker_id, f"{ip}:{listen}", f"{ip}:{admin}",
                              None if metrics is None else f"{ip}:{metrics}")
        self.backend._reach[broker_id] = reach
        return Placement(f"0.0.0.0:{listen}", reach.admin, reach.metrics, reach)

    def link(self, a: str, b: str) -> Any:
        entry = self.wired.get(frozenset((a, b)))
        if entry is None:
            raise BackendError(f"no link {a}-{b} in this {self.backend.name} run")
        return entry

    def link_address(self, broker_id: str, neighbor: str) -> str:
        """Where `neighbor` dials `broker_id` over their link of the network's own."""
        return f"{self.link(broker_id, neighbor).ip[broker_id]}:{self.backend._ports[0]}"

    # the address book ----------------------------------------------------------------------

    @property
    def reconfigurable(self) -> bool:
        return self.peer_network

    def book_address(self, broker_id: str) -> str:
        ip = self.peer_ip.get(broker_id)
        if ip is None:
            if not self.peer_network:
                raise BackendError(
                    f"the {self.backend.name} backend: this run has no peer network (it was"
                    " planned without reconfiguration), so brokers cannot reach non-neighbours")
            raise BackendError(f"broker {broker_id}: not on this run's peer network")
        return f"{ip}:{self.backend._ports[0]}"

    def is_peer_link(self, a: str, b: str) -> bool:
        return frozenset((a, b)) in self.peer_links

    # the Backend interface, for both kinds of link -----------------------------------------

    def peer_address(self, broker_id: str, neighbor: str) -> str:
        if self.is_peer_link(broker_id, neighbor):
            return self.book_address(broker_id)
        return self.link_address(broker_id, neighbor)

    def add(self, a: str, b: str) -> None:
        key = frozenset((a, b))
        if key in self.idle_wires:  # a planned link linked again: it is still there
            self.idle_wires.discard(key)
            self.backend.enter_link(a, b)
            return
        if key in self.peer_links or any(key == frozenset(e) for e in self.wires.links()):
            raise BackendError(f"link {a}-{b} exists already")
        if self.peer_network:
            for x in (a, b):
                self.book_address(x)  # both on the peer network, or say which is not
            self.peer_links.add(key)
        else:
            self.wires.link(a, b)
        self.backend.enter_link(a, b)

    def remove(self, a: str, b: str) -> None:
        key = frozenset((a, b))
        bk = self.backend
        if key in self.peer_links:
            bk.drop_link(a, b)
            self.peer_links.discard(key)
        elif self.peer_network:
            # a planned link a reconfiguration removed stays in the network, unused: the
            # brokers' session over it ends when they find it idle (tuning.link_idle_s), and
            # a later exchange that links the pair again dials it as before
            self._idle(a, b)
            bk.drop_link(a, b)
            self.idle_wires.add(key)
            for x, y in ((a, b), (b, a)):  # a restart of x still finds y there
                with contextlib.suppress(BackendError):  # (attached: addresses unknown here)
                    config = bk._configs[x]
                    bk._configs[x] = config.model_copy(
                        update={"peers": {**config.peers, y: self.link_address(y, x)}})
        else:
            self.wires.unlink(a, b)
            bk.drop_link(a, b)

    def _idle(self, a: str, b: str) -> None:
        """Raise BackendError unless a-b is a planned link in use."""
        if frozenset((a, b)) in self.idle_wires:
            raise BackendError(f"no link {a}-{b}: a reconfiguration removed it")

    def remove_wires_of(self, broker_id: str) -> None:
        """A broker removed: the links of its own in the network go with it."""
        for a, b in [e for e in self.wires.links(everything=True) if broker_id in e]:
            self.wires.unlink(a, b)
            if frozenset((a, b)) in self.idle_wires:
                self.idle_wires.discard(frozenset((a, b)))
            else:
                self.backend.drop_link(a, b)

    def links(self) -> list[tuple[str, str]]:
        peer = [tuple(sorted(k)) for k in self.peer_links]
        wired = [e for e in self.wires.links() if frozenset(e) not in self.idle_wires]
        return sorted({*wired, *peer})  # type: ignore[arg-type]

    def cut(self, a: str, b: str) -> None:
        self._idle(a, b)
        if self.is_peer_link(a, b):
            self.backend.user_links.cut(a, b)
        else:
            self.wires.cut(a, b, "down")

    def heal(self, a: str, b: str) -> None:
        self._idle(a, b)
        if self.is_peer_link(a, b):
            self.backend.user_links.heal(a, b)
        else:
            self.wires.cut(a, b, "up")

    def state(self, a: str, b: str) -> LinkState:
        self._idle(a, b)
        if self.is_peer_link(a, b):
            return self.backend.user_links.state(a, b)
        return self.wires.state(a, b)

    def shape(self, a: str, b: str, change: LinkShapeChange, *, both_ways: bool = True) -> None:
        self._idle(a, b)
        if self.is_peer_link(a, b):  # a rate too: the brokers' shaper (the segment is shared)
            self.backend.user_links.shape(a, b, change, both_ways=both_ways)
        else:
            self.wires.shape(a, b, change, both_ways)

    def forget(self, broker_id: str) -> None:
        """A broker removed: its peer links (their config entries go with the broker)."""
        self.peer_links = {k for k in self.peer_links if broker_id not in k}
        self.idle_wires = {k for k in self.idle_wires if broker_id not in k}
        self.peer_ip.pop(broker_id, None)

    def state_record(self) -> dict[str, Any]:
        return {"peer_network": self.peer_network, "peer_ip": dict(self.peer_ip),
                "peer_links": sorted(sorted(k) for k in self.peer_links),
                "idle_wires": sorted(sorted(k) for k in self.idle_wires)}

    def load(self, state: dict[str, Any]) -> None:
        self.peer_network = bool(state.get("peer_network"))
        self.peer_ip = dict(state.get("peer_ip") or {})
        self.peer_links = {frozenset(pair) for pair in state.get("peer_links") or []}
        self.idle_wires = {frozenset(pair) for pair in state.get("idle_wires") or []}
