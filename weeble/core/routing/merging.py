"""Merging-based routing made self-stabilizing (thesis §3.3.1 "merging", spec ch3 §2.6).

A broker merges the filters it holds *for one destination* into perfect mergers (N(f_M) is
exactly the union of its constituents) and forwards the merger instead of the constituents.
Merger records live in RAM, carry a second-chance flag, and are checked against the table each
time they are used, so a corrupted record (F14) is dropped at its first use.

Deviation from the thesis, deliberately: the thesis renews a merger only once per π, when its
last constituent is refreshed. With unsynchronized clocks two such renewals can be π + ρ apart,
longer than an upstream lease survives (≥ π), so valid upstream entries would expire in a
fault-free run. Re-forwarding the merger on every constituent refresh (the previous fix) keeps
renewals ≤ ρ apart but amplifies: the next broker re-forwards its own merger once per incoming
refresh, relayed mergers included, so subscription traffic grew ~1.5× per hop (issue 7 item 7).
Here the broker renews its valid mergers itself, every ρ, like a client refreshes its
subscriptions (`renew`, on the routing layer's `renew` timer): one renewal per merger per ρ,
whatever the constituents do, and a merger is forwarded at once only when it is formed.
The variants differ as in the thesis: variant 1 also forwards a constituent on its own while its
merger's flag is 0; variant 2 never forwards a constituent of an existing merger. Under variant 1
a merger whose filter is one of its constituents (a filter of the destination covers the rest)
is that constituent: it goes out under the constituent's id, and the constituent does not go
out beside it (`_adopted_id`), or every hop of a path added a merger id for one filter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from weeble.core.events import Effect, Send, Trace
from weeble.core.filters import Filter, merge
from weeble.core.messages import Adv, Sub
from weeble.core.rom import Algorithm
from weeble.core.routing.plane import Plane
from weeble.core.routing.strategy import Covering
from weeble.core.table import Merger, RoutingTable


def merger_id(broker_id: str, dest: str, f: Filter) -> str:
    # Deterministic, so a refresh of the same merger replaces its upstream entry (SC-1).
    return f"merge:{broker_id}:{dest}:{f}"


Group = tuple[Filter, frozenset[Filter]]  # a (merged) filter and its constituents


def closure(groups: list[Group]) -> list[Group]:
    """Merge groups pairwise, exactly, until no two merge. Deterministic in its input order."""
    items = list(groups)
    merged = True
    while merged:
        merged = False
        for i in range(len(items)):
            for j in range(i + 1, len(items)):
                m = merge(items[i][0], items[j][0])
                if m is not None:
                    items[i] = (m, items[i][1] | items[j][1])
                    del items[j]
                    merged = True
                    break
            if merged:
                break
    return items


def overrun(mergers: dict[str, Merger]) -> None:
    """SC-2 for merger records: drop flag-0 ones, clear the flag of the rest."""
    for mid in [mid for mid, m in mergers.items() if m.flag == 0]:
        del mergers[mid]
    for m in mergers.values():
        m.flag = 0


def loans(table: RoutingTable) -> list[dict[str, str]]:
    """A table's loans (RoutingTable.loaned) as a snapshot lists them, in a stable order."""
    return sorted(({"dest": d, "filter": str(f)} for d, f in table.loaned),
                  key=lambda x: (x["dest"], x["filter"]))


def _valid(table: RoutingTable, m: Merger) -> bool:
    """A merger is genuine iff each constituent is held for its destination and they merge to it."""
    if len(m.constituents) < 2:
        return False
    for c in m.constituents:
        if not any(e.dest == m.dest for e in table.identical(c)):
            return False
    groups = closure([(c, frozenset((c,))) for c in sorted(m.constituents, key=str)])
    return len(groups) == 1 and groups[0][0] == m.filter


def _adopted_id(table: RoutingTable, m: Merger) -> str:
    """The id a merger goes out under in variant 1: its own, unless its filter is one of its
    constituents (that filter of the destination covers the rest; often a merger received from
    there). Then the merger is that constituent, and goes out under the constituent's id (the
    least, if the destination holds it under several). Under its own id it went out beside the
    constituent, which variant 1 forwarded while the merger's flag was 0, and each hop of a
    path added an id: b9 of a chain of 10 held 8 merger ids of `price <= 30` towards b8
    (issue 23). Variant 2 never forwards a constituent of a merger, so its id is replaced
    hop by hop instead."""
    if m.filter in m.constituents:
        ids = [e.sub_id for e in table.identical(m.filter) if e.dest == m.dest]
        if ids:
            return min(ids)
    return m.merger_id


def _containing(table: RoutingTable, dest: str, f: Filter) -> Merger | None:
    for m in table.mergers.values():
        if m.dest == dest and f in m.constituents:
            return m
    return None


class Merging(Covering):
    """Covering-based routing that forwards perfect mergers instead of their constituents."""

    def _form(self, table: RoutingTable, dest: str, f: Filter) -> Merger | None:
        """Merge f with what is already held for `dest`; store and return the merger, if any."""
        mergers = table.mergers
        # only genuine mergers: a false one (F14) would lend its filter to the new merger, which
        # goes out at once (`renew` drops it within ρ, but the upstream entry lived 2π more)
        own = [m for m in mergers.values() if m.dest == dest and _valid(table, m)]
        in_mergers = {c for m in own for c in m.constituents}
        lone = sorted({e.filter for e in table if e.dest == dest} - in_mergers - {f}, key=str)
        groups = [(f, frozenset((f,)))]
        groups += [(m.filter, m.constituents) for m in own]
        groups += [(g, frozenset((g,))) for g in lone]
        merged, constituents = next(g for g in closure(groups) if f in g[1])
        if len(constituents) < 2:
            return None
        for m in own:  # absorbed mergers are replaced; their upstream entries simply expire
            if m.constituents <= constituents:
                del mergers[m.merger_id]
        new = Merger(merger_id(self.broker_id, dest, merged), merged, dest, constituents, 0)
        mergers[new.merger_id] = new
        return new

    def on_subscribe(self, plane: Plane, source: str, sub_id: str, f: Filter) -> list[Effect]:
        """Forwarding for a (re)subscription already inserted into the table (SC-1 done)."""
        table, tag, sub = plane.table, plane.tag, self.sub_cls
        table.loaned.pop((source, f), None)  # refreshed: no longer on a dissolved merger's loan
        effects: list[Effect] = []
        m = _containing(table, source, f)
        if m is not None and not _valid(table, m):
            del table.mergers[m.merger_id]
            effects.append(Trace("merger_invalid", m.as_dict()))
            m = None
        was_flag = 1
        formed = m is None
        if m is None:
            m = self._form(table, source, f)
            if m is None:  # nothing to merge with: plain covering-based forwarding
                targets = self.sub_targets(plane, f, source)
                return effects + [Send(n, sub(sub_id, f, tag)) for n in targets]
        else:
            was_flag = m.flag
        # Variant 1: a constituent goes on too while its merger's flag is 0, unless it is the
        # merger's own filter, which the merger already sends under its id (`_adopted_id`)
        if was_flag == 0 and self.algorithm is Algorithm.MERGING1 and f != m.filter:
            targets = self.sub_targets(plane, f, source)
            effects.extend(Send(n, sub(sub_id, f, tag)) for n in targets)
        if all(any(e.dest == source and e.flag for e in table.identical(c))
               for c in m.constituents):
            m.flag = 1  # renewed: every constituent was refreshed since the last overrun
        if formed:  # a new merger goes out now; `renew` keeps it alive from then on
            effects.extend(self._forward(plane, m))
        return effects

    def _forward(self, plane: Plane, m: Merger) -> list[Effect]:
        sub, tag = self.sub_cls, plane.tag
        sent = (_adopted_id(plane.table, m) if self.algorithm is Algorithm.MERGING1
                else m.merger_id)
        return [Send(n, sub(sent, m.filter, tag))
                for n in self.sub_targets(plane, m.filter, m.dest)]

    def renew(self, plane: Plane) -> list[Effect]:
        """Every ρ: re-forward each merger that is still genuine, as a client refreshes."""
        table = plane.table
        effects: list[Effect] = []
        for m in list(table.mergers.values()):
            if not _valid(table, m):
                del table.mergers[m.merger_id]
                effects.append(Trace("merger_invalid", m.as_dict()))
                continue
            effects.extend(self._forward(plane, m))
        return effects

    def withdrawn(self, planes: Sequence[Plane], plane: Plane, tag: int, source: str,
                  f: Filter) -> list[Effect]:
        effects = self._dissolve(planes, plane, tag, source, f)
        effects.extend(self.uncovered(plane, tag, f))  # merging is covering with mergers on top
        return effects

    def expired(self, planes: Sequence[Plane], plane: Plane,
                entries: Sequence[Any]) -> list[Effect]:
        """A constituent expired: dissolve its mergers at once, as if it had been unsubscribed.

        A constituent that a dissolved merger re-forwarded as a plain subscription, and that
        expired before its destination refreshed it, is withdrawn as an unsubscription is (the
        unsubscription goes where the subscription went): the re-forward gave it a fresh lease
        upstream, and a stale one (a bogus entry, an absorbed merger's entry that nobody
        renews) left to expire there was re-forwarded again by the next dissolving hop, 2π
        more per hop (issue 23: 31.7-41.5 s after the episode against Δ = 17.24 s on a
        binary tree of 31). So a dissolved merger renews a constituent for no longer than its
        own lease. Both variants (merging2: 41.5 s -> 16.5 s after the episode on the tree
        of 15 of tests/sim/test_merging_dissolve.py, Δ = 25.18 s). Under variant 2 a
        destination renews its constituents through its mergers, so a loaned constituent may
        expire while still wanted; its unsubscription dissolves mergers upstream, whose rest
        often merges again under the same id, which `_dissolve` no longer unsubscribes (that
        churn was b0→b1's 8.2 Subs per ρ on the chain of 10 of tests/sim/test_traffic.py).

        Otherwise the merger's upstream entries outlive it by up to 2π, and where mergers nest
        (a broker merges a received merger again) every level adds that much: a bogus entry
        at one broker kept a merger two hops away alive for ~6π. Dissolving sends the
        unsubscription upstream, so the whole structure is gone within 2π + d·δmax (3.8)."""
        effects: list[Effect] = []
        done: set[tuple[str, Filter]] = set()
        for e in entries:
            if (e.dest, e.filter) in done:
                continue
            done.add((e.dest, e.filter))
            caused = self._dissolve(planes, plane, plane.tag, e.dest, e.filter)
            # re-forwarded by a dissolved merger and never refreshed since: unsubscribed
            # where a subscription would go, so the fresh leases it got upstream end too
            caused += self.repaid(planes, plane, e)
            for effect in caused:
                if effect not in effects:
                    effects.append(effect)
        return effects

    def _dissolve(self, planes: Sequence[Plane], plane: Plane, tag: int, source: str,
                  f: Filter) -> list[Effect]:
        """Dissolve the mergers f belonged to: re-forward what remains, then withdraw them."""
        table = plane.table
        if any(e.dest == source for e in table.identical(f)):
            return []  # the destination still holds f under another id
        effects: list[Effect] = []
        unsub = self.unsub_cls
        probe = self.sub_cls("", f, tag)  # the type of the subscriptions this plane sends
        for m in [m for m in table.mergers.values() if m.dest == source and f in m.constituents]:
            del table.mergers[m.merger_id]
            for c in sorted(m.constituents - {f}, key=str):
                held = [e for e in table.identical(c) if e.dest == source]
                if held:
                    for effect in self.on_subscribe(plane, source, held[0].sub_id, c):
                        if effect not in effects:
                            effects.append(effect)
                    # a fresh lease upstream for an entry that may be stale (a bogus one, an
                    # absorbed merger's that nobody renews): on loan until its next refresh
                    table.loaned[source, c] = None  # see `expired`
            # whatever the merger covered for other destinations was suppressed on its account
            # (the destination's own filters were re-forwarded above, or merged again: variant 2
            # never forwards a constituent of an existing merger)
            own = source if self.algorithm is Algorithm.MERGING2 else None
            effects.extend(e for e in self.uncovered(plane, tag, m.filter, exclude=own)
                           if e not in effects)
            if any(e.dest == source for e in table.identical(m.filter)):
                # A constituent identical to the merger stays (and was re-forwarded): an
                # unsubscription for this filter would make the neighbour drop it too.
                continue
            # The rest may have merged again into the same filter, so under the same id, and
            # gone out just now (on_subscribe above): an unsubscription behind it would drop
            # that merger where it went, for up to ρ, and dissolve what was merged with it
            # there (in a fault-free run on a chain of 10 this churned Subs at every hop).
            again = {e.neighbor for e in effects if isinstance(e, Send)
                     and type(e.message) is type(probe) and _control_id(e.message) == m.merger_id}
            effects.extend(Send(n, unsub(m.merger_id, m.filter, tag))
                           for n in self.unsub_targets(planes, m.filter, source)
                           if n not in again)
        return effects


def _control_id(message: object) -> str | None:
    """The id a subscription or an advertisement carries (the advert plane sends Adv, whose id
    is `adv_id`); None for any other message."""
    if isinstance(message, Sub):
        return message.sub_id
    if isinstance(message, Adv):
        return message.adv_id
    return None
