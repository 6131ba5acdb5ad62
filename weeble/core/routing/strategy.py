"""Routing algorithms as interchangeable strategies (thesis Ch. 3, spec ch3 §2.2–2.6).

A strategy decides where a (re)subscription or an unsubscription goes once the table holds it
(SC-1/SC-3 are the scheme's business: `leasing.py`, `rebuild.py`). It sees planes, never the
broker. The same strategy class routes subscriptions over the notification tables and
advertisements over the advertisement tables: only the message classes differ.

- flooding: subscriptions stay local; notifications go everywhere (routing layer);
- simple: every subscription everywhere (peer-to-peer) or up (hierarchical);
- identity: Algorithm 1 with flag-1 counting (l.1266–1338);
- covering 1/2: Algorithm 1 over covering entries; variant 2 counts coverers whatever their flag;
- merging 1/2: covering plus perfect mergers per destination (`merging.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from weeble.core.events import Effect, Send
from weeble.core.filters import Filter
from weeble.core.messages import Control
from weeble.core.overlay import Topology
from weeble.core.rom import Algorithm, Options
from weeble.core.routing.plane import Plane
from weeble.core.table import RoutingTable

# Where subscriptions may go because an overlapping advertisement came from there (§3.4.2):
# given a filter, the neighbours to keep. None: no advertisements, every neighbour qualifies.
Advertised = Callable[[Filter], set[str]]


class Strategy:
    """The base: what every filtering algorithm shares (Algorithm 1 and its helpers)."""

    algorithm: Algorithm
    counts_identical = True  # identity and up: holders of identical (or covering) entries count
    covering = False

    def __init__(
        self,
        *,
        broker_id: str,
        algorithm: Algorithm,
        hierarchical: bool,
        options: Options,
        wrapper: bool,
        sub_cls: Callable[[str, Filter, int], Control],
        unsub_cls: Callable[[str, Filter, int], Control],
    ) -> None:
        self.broker_id = broker_id
        self.algorithm = algorithm
        self.hierarchical = hierarchical
        # Under the wrapper R keeps no flags: every entry counts (flags never drop to 0).
        self.flag1 = options.flag_rule and not wrapper
        self.unsub_flag1 = not options.unsub_counts_all and not wrapper
        self.renew_forwarded = options.renew_forwarded
        self.sub_cls = sub_cls
        self.unsub_cls = unsub_cls
        self.advertised: Advertised | None = None

    # ---- what the scheme calls --------------------------------------------------------------

    def unexpected(self, topo: Topology, neighbor: str) -> bool:
        """A control message from this neighbour is garbage: hierarchical ones never come down."""
        return self.hierarchical and neighbor == topo.parent

    def on_subscribe(self, plane: Plane, source: str, sub_id: str, f: Filter) -> list[Effect]:
        """Forwarding for a (re)subscription already inserted into plane.table (SC-1 done)."""
        sub = self.sub_cls
        tag = plane.tag
        loaned = plane.table.loaned
        if loaned:
            loaned.pop((source, f), None)  # refreshed: no longer on loan (see `expired`)
        return [Send(n, sub(sub_id, f, tag)) for n in self.sub_targets(plane, f, source)]

    def on_unsubscribe(self, planes: Sequence[Plane], out_tag: int, source: str, sub_id: str,
                       f: Filter, remote: bool) -> list[Effect]:
        """After SC-3: what the unsubscription sets off (over every plane, one decision)."""
        effects: list[Effect] = []
        for plane in planes:
            table = plane.table
            if remote:
                # The neighbour forwards an unsubscription only when it has no identical or
                # covering interest left, so every identical entry for it is obsolete.
                for e in [e for e in table.identical(f) if e.dest == source]:
                    table.discard(e)
            if table.loaned and not any(e.dest == source for e in table.identical(f)):
                table.loaned.pop((source, f), None)  # unsubscribed: nothing on loan
            effects.extend(self.withdrawn(planes, plane, out_tag, source, f))
        # One decision over both tables: R run on the table being rebuilt alone would find no
        # other holder there and withdraw an interest the complete table still has.
        withdrawn = self.unsub_targets(planes, f, source)
        for plane in planes:
            effects.extend(self._hand_over(plane, out_tag, f, source, withdrawn))
        unsub = self.unsub_cls
        effects.extend(Send(n, unsub(sub_id, f, out_tag)) for n in withdrawn)
        unique: list[Effect] = []
        for effect in effects:
            if effect not in unique:  # both tables may ask for the same message
                unique.append(effect)
        return unique

    def withdrawn(self, planes: Sequence[Plane], plane: Plane, tag: int, source: str,
                  f: Filter) -> list[Effect]:
        """What f's departure from `plane` re-forwards (covering, merging); nothing here."""
        return []

    def expired(self, planes: Sequence[Plane], plane: Plane,
                entries: Sequence[Any]) -> list[Effect]:
        """What the expiry of `entries` at an overrun sets off: the withdrawal of those on
        loan (`repaid`); otherwise leasing upstream takes care of what they were forwarded
        for."""
        effects: list[Effect] = []
        if plane.table.loaned:
            for e in entries:
                effects.extend(x for x in self.repaid(planes, plane, e) if x not in effects)
        return effects

    def repaid(self, planes: Sequence[Plane], plane: Plane, e: Any) -> list[Effect]:
        """An expired entry that was re-sent on its own account (on loan: a dissolved
        merger's constituent, a subscription sent after a new advertisement) and never
        refreshed since is unsubscribed where a subscription would go: the re-send gave it a
        fresh lease there, beyond its own (issue 23). A refreshed one is no longer on loan."""
        table = plane.table
        if table.loaned.pop((e.dest, e.filter), 0) is not None or any(
                x.dest == e.dest for x in table.identical(e.filter)):
            return []
        unsub = self.unsub_cls
        return [Send(n, unsub(e.sub_id, e.filter, plane.tag))
                for n in self.unsub_targets(planes, e.filter, e.dest)]

    def renew(self, plane: Plane) -> list[Effect]:
        """Every ρ (only strategies that keep state of their own: merging's mergers)."""
        return []

    def bootstrap(self, plane: Plane, neighbor: str, within: Filter | None = None,
                  exclude: frozenset[str] = frozenset(), lend: bool = False) -> list[Effect]:
        """A new link to `neighbor` (AddLeaf, a new advertisement from there): send it every
        filter held for other destinations (overlapping `within`, if given; not for the
        subscriptions `exclude` names), and keep renewing what was sent, so its table becomes
        what it would be had the link always existed. `lend`: each one sent is on loan until
        its destination refreshes it (`expired`)."""
        topo = plane.topo
        if self.hierarchical and neighbor != topo.parent:
            return []  # subscriptions only ever go up
        table = plane.table
        sub, tag = self.sub_cls, plane.tag
        effects: list[Effect] = []
        for g in list(table.filters()):
            if within is not None and not _overlap(g, within):
                continue
            if not self._towards(g, neighbor):
                continue
            heir = next((e for e in table.identical(g)
                         if e.dest != neighbor and e.sub_id not in exclude), None)
            if heir is None:
                continue
            if self.renew_forwarded:
                table.forwarded[g, neighbor] = heir.dest
            if lend:
                table.loaned[heir.dest, g] = None
            effects.append(Send(neighbor, sub(heir.sub_id, g, tag)))
        return effects

    def adopt(self, plane: Plane, neighbor: str) -> None:
        """A link the coordinated exchange added (a, thesis 4.4.2): the far side learned this
        side's subscriptions from the relays at Begin, not from here, so nothing here renews
        them over the new link, and under leasing (which 4.4.2 does not have) the far side's
        entries expire a lease later. Name a renewer per filter, as `bootstrap` does, without
        sending (the relays did). Found: identity routing under the optimizer lost 33
        notifications that way (tests/sim/test_ci_sim.py)."""
        if (not self.counts_identical or not self.renew_forwarded
                or neighbor not in self.upstream(plane.topo)):
            return  # flooding and simple routing renew by id, not through `forwarded`
        table = plane.table
        forwarded = table.forwarded
        for g in list(table.filters()):
            if (g, neighbor) in forwarded or not self._towards(g, neighbor):
                continue
            heir = next((e for e in table.identical(g) if e.dest != neighbor), None)
            if heir is not None:
                forwarded[g, neighbor] = heir.dest

    def lend(self, plane: Plane, neighbor: str) -> None:
        """A link the coordinated exchange added (a): what this side holds for destinations
        other than `neighbor` reached the far side as the relays at Begin (routes copied from
        the r-endpoint, thesis A3.4-10), with a fresh lease there that nobody here renews if
        the entry here is never refreshed again (a crashed client's, waiting to expire): on
        loan until its destination refreshes it, withdrawn over a if it expires first
        (`repaid`). Found by the issue-28 sweep, simple peer-to-peer seeds 45 and 381: the
        relayed copy of a crashed client's route lived 8.3 s after the crash, L = 6.1 s."""
        table = plane.table
        for e in list(table):
            if e.dest != neighbor and self._towards(e.filter, neighbor):
                table.loaned[e.dest, e.filter] = None

    # ---- Algorithm 1 and its helpers --------------------------------------------------------

    def upstream(self, topo: Topology) -> tuple[str, ...]:
        """Where subscriptions may go: the parent only, under hierarchical routing."""
        if self.hierarchical:
            return () if topo.parent is None else (topo.parent,)
        return topo.ordered

    def sub_targets(self, plane: Plane, f: Filter, source: str) -> list[str]:
        """Where a (re)subscription for f from `source` goes (§2.3–2.5 of the spec).

        Identity, covering, merging: Algorithm 1 with flag-1 counting decides; and a refresh
        from the destination whose subscription was last forwarded for f to a neighbour goes
        there again, so that neighbour's entry is renewed every ρ like a client's
        (Options.renew_forwarded). Keyed by destination, not sub_id: a downstream broker may
        hand its interest over to another subscription id at any time.
        """
        topo = plane.topo
        table = plane.table
        holders = self.holders(table, f, source, flag1=self.flag1)
        targets = self.algorithm1(topo, holders, source)
        if self.renew_forwarded:
            forwarded = table.forwarded
            for n in self.upstream(topo):
                if n != source and n not in targets and forwarded.get((f, n)) == source:
                    targets.append(n)
            if self.advertised is not None:
                targets = self._advertised(f, targets)
            for n in targets:
                forwarded[f, n] = source
        elif self.advertised is not None:
            targets = self._advertised(f, targets)
        return targets

    def holders(self, table: RoutingTable, f: Filter, source: str, flag1: bool) -> dict[str, None]:
        """Destinations D' ≠ source with an entry identical to f (identity) or covering it.

        Flag-1 counting is the self-stabilizing rule (§3.3.1). Covering variant 2 counts a strictly
        covering entry whatever its flag; identical entries always obey `flag1`.
        """
        found: dict[str, None] = {}
        for e in table.identical(f):
            if e.dest != source and (e.flag or not flag1):
                found[e.dest] = None
        return found

    def algorithm1(self, topo: Topology, holders: dict[str, None], source: str) -> list[str]:
        """Algorithm 1 (l.1275–1299); hierarchical form: forward up iff nobody else holds f."""
        if self.hierarchical:
            parent = topo.parent
            if holders or parent is None or source == parent:
                return []
            return [parent]
        if not holders:
            return [n for n in topo.ordered if n != source]
        if len(holders) == 1:
            (only,) = holders
            return [only] if only in topo.neighbors else []
        return []

    def spread(self, topo: Topology, source: str) -> list[str]:
        if self.hierarchical:
            parent = topo.parent
            return [parent] if parent is not None and source != parent else []
        return [n for n in topo.ordered if n != source]

    def unsub_targets(self, planes: Sequence[Plane], f: Filter, source: str) -> list[str]:
        """Where an unsubscription goes: the same i-based rule as subscriptions (l.1266),
        counting holders in every table (both, under the wrapper)."""
        holders: dict[str, None] = {}
        for plane in planes:
            holders |= self.holders(plane.table, f, source, flag1=self.unsub_flag1)
        targets = self.algorithm1(planes[0].topo, holders, source)
        return targets if self.advertised is None else self._advertised(f, targets)

    def _hand_over(
        self, plane: Plane, tag: int, f: Filter, gone: str, withdrawn: list[str]
    ) -> list[Effect]:
        """The destination that renewed a neighbour's entry for f has no f left, but others
        do: the next one takes over now, not after the next overrun. The re-send is on the
        heir's account: on loan until the heir refreshes it (`repaid`). An heir that never
        does (a crashed client's entry, waiting to expire) had given the neighbour a fresh
        lease beyond its own, while this broker, counting that neighbour's entry as a holder,
        kept its other destinations' refreshes from going there: when the neighbour's entry
        lapsed, a live subscriber was cut off until its next refresh (identity seed 28, the
        root crashed, then a client: 7.4 s after the episode, Δ = 6.1 s)."""
        table = plane.table
        if any(e.dest == gone for e in table.identical(f)):
            return []  # `gone` still holds f under another subscription id
        effects: list[Effect] = []
        sub = self.sub_cls
        for n in self.upstream(plane.topo):
            if table.forwarded.get((f, n)) != gone:
                continue
            del table.forwarded[f, n]
            if n in withdrawn:
                continue
            heir = next((e for e in table.identical(f) if e.dest != n), None)
            if heir is not None:
                table.forwarded[f, n] = heir.dest
                table.loaned[heir.dest, f] = None
                effects.append(Send(n, sub(heir.sub_id, f, tag)))
        return effects

    def _advertised(self, f: Filter, targets: list[str]) -> list[str]:
        advertised = self.advertised(f)  # type: ignore[misc]
        return [n for n in targets if n in advertised]

    def _towards(self, f: Filter, neighbor: str) -> bool:
        return self.advertised is None or neighbor in self.advertised(f)


def _overlap(f: Filter, g: Filter) -> bool:
    """Some notification matches both (exact: filters are canonical conjunctions)."""
    return (f & g).satisfiable


class Flooding(Strategy):
    """Subscriptions stay at the subscriber's broker (local entries only)."""

    counts_identical = False

    def unexpected(self, topo: Topology, neighbor: str) -> bool:
        return True  # flooding keeps local entries only

    def on_subscribe(self, plane: Plane, source: str, sub_id: str, f: Filter) -> list[Effect]:
        return []

    def on_unsubscribe(self, planes: Sequence[Plane], out_tag: int, source: str, sub_id: str,
                       f: Filter, remote: bool) -> list[Effect]:
        return []

    def bootstrap(self, plane: Plane, neighbor: str, within: Filter | None = None,
                  exclude: frozenset[str] = frozenset(), lend: bool = False) -> list[Effect]:
        return []

    def lend(self, plane: Plane, neighbor: str) -> None:
        return  # local entries only: nothing was relayed on their account


class Simple(Strategy):
    """Every subscription is flooded (peer-to-peer) or sent up (hierarchical), by id."""

    counts_identical = False

    def sub_targets(self, plane: Plane, f: Filter, source: str) -> list[str]:
        targets = self.spread(plane.topo, source)
        return targets if self.advertised is None else self._advertised(f, targets)

    def on_unsubscribe(self, planes: Sequence[Plane], out_tag: int, source: str, sub_id: str,
                       f: Filter, remote: bool) -> list[Effect]:
        for plane in planes:
            table = plane.table
            if table.loaned and not any(e.dest == source for e in table.identical(f)):
                table.loaned.pop((source, f), None)  # unsubscribed: nothing on loan
        unsub = self.unsub_cls
        return [Send(n, unsub(sub_id, f, out_tag)) for n in self.unsub_targets(planes, f, source)]

    def unsub_targets(self, planes: Sequence[Plane], f: Filter, source: str) -> list[str]:
        """By id: an unsubscription goes wherever its subscription went."""
        targets = self.spread(planes[0].topo, source)
        return targets if self.advertised is None else self._advertised(f, targets)

    def bootstrap(self, plane: Plane, neighbor: str, within: Filter | None = None,
                  exclude: frozenset[str] = frozenset(), lend: bool = False) -> list[Effect]:
        topo = plane.topo
        if self.hierarchical and neighbor != topo.parent:
            return []
        sub, tag = self.sub_cls, plane.tag
        sent = [e for e in list(plane.table)
                if e.dest != neighbor and e.sub_id not in exclude
                and (within is None or _overlap(e.filter, within))
                and self._towards(e.filter, neighbor)]
        if lend:
            for e in sent:
                plane.table.loaned[e.dest, e.filter] = None
        return [Send(neighbor, sub(e.sub_id, e.filter, tag)) for e in sent]


class Identity(Strategy):
    """Algorithm 1 over identical entries."""


class Covering(Strategy):
    """Algorithm 1 over identical and covering entries (variants 1 and 2, §2.5)."""

    covering = True

    def holders(self, table: RoutingTable, f: Filter, source: str, flag1: bool) -> dict[str, None]:
        found = Strategy.holders(self, table, f, source, flag1)
        any_flag = self.algorithm is Algorithm.COVERING2 or not flag1
        for g in table.filters():
            if g != f and g.covers(f):
                for e in table.identical(g):
                    if e.dest != source and (e.flag or any_flag):
                        found[e.dest] = None
        return found

    def withdrawn(self, planes: Sequence[Plane], plane: Plane, tag: int, source: str,
                  f: Filter) -> list[Effect]:
        return self.uncovered(plane, tag, f)

    def uncovered(self, plane: Plane, tag: int, f: Filter,
                  exclude: str | None = None) -> list[Effect]:
        """Covering: f leaves; the subscriptions it covered must now reach every neighbour.

        Algorithm 1 alone is not enough here: a covered subscription that arrived while f was
        held was never forwarded, and identical ones that came after it counted it as a holder
        (i ≥ 2) and were not forwarded either. So each neighbour that has no renewer for the
        uncovered filter gets one now, and keeps it through sub_targets' renewal rule.

        Each one re-sent is on loan until its destination refreshes it (`repaid`): the re-send
        gives it a fresh lease upstream, and a stale one (a bogus entry, a crashed client's)
        otherwise outlived its own lease there by up to 2π (merging1 on the tree of 15, seed 11:
        an `entry.dest` corruption's entry uncovered 8.6 s after the fault, spurious upstream
        18.5 s after it, Δ = 17.2 s).
        """
        table = plane.table
        effects: list[Effect] = []
        done: set[tuple[Filter, str]] = set()
        sub = self.sub_cls
        upstream = self.upstream(plane.topo)
        for g in [g for g in table.filters() if g != f and f.covers(g)]:
            for e in list(table.identical(g)):
                if (g, e.dest) in done or e.dest == exclude:
                    continue
                done.add((g, e.dest))
                targets = self.sub_targets(plane, g, e.dest)
                for n in upstream:
                    if (n != e.dest and n not in targets and not self._renewed(table, g, n)
                            and self._towards(g, n)):
                        table.forwarded[g, n] = e.dest
                        targets.append(n)
                if targets:
                    table.loaned[e.dest, g] = None
                effects.extend(Send(n, sub(e.sub_id, g, tag)) for n in targets)
        return effects

    def _renewed(self, table: RoutingTable, g: Filter, n: str) -> bool:
        """Does some destination other than n still renew neighbour n's entry for g?"""
        d = table.forwarded.get((g, n))
        return d is not None and d != n and any(e.dest == d for e in table.identical(g))
