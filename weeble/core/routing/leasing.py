"""Leasing with second chance (SC-1…SC-4, thesis §3.3.1) around any strategy.

One table. A (re)subscription replaces the entry with its id towards its destination and sets the
flag (SC-1, per destination: see RoutingTable.refresh); every π
the overrun deletes flag-0 entries and clears the rest (SC-2); an unsubscription removes the
entry (SC-3); clients refresh every ρ (SC-4, the clients' business).
"""

from __future__ import annotations

from collections.abc import Sequence

from weeble.core.events import Effect, Send
from weeble.core.filters import Filter
from weeble.core.overlay import Topology
from weeble.core.routing.plane import Plane
from weeble.core.routing.strategy import Strategy
from weeble.core.table import Entry, KeyCache, RoutingTable


class ControlRam:
    """One control plane's slice of RAM: its tables and (wrapper) the A7 idempotence sets."""

    __slots__ = ("seen", "tables")

    def __init__(self, n_tables: int, keys: KeyCache) -> None:
        self.tables: list[RoutingTable] = [RoutingTable(keys) for _ in range(n_tables)]
        # A7 idempotence wrapper: (sub_id, source) pairs seen per tag since that table's reset
        self.seen: list[set[tuple[str, str]]] = [set() for _ in range(n_tables)]


def withdraw(planes: Sequence[Plane], sub_id: str, f: Filter, source: str, remote: bool) -> None:
    """SC-3. From a neighbour, per destination: it removes that neighbour's entries with the id.

    In a static tree every entry with one id points the same way, so this is SC-3 as printed;
    across a link exchange one id points both ways for a while (the relayed copy towards a, the
    old one towards r), and withdrawing the old route must not remove the new one.
    """
    for plane in planes:
        table = plane.table
        if remote:
            for e in table.with_id(sub_id):
                if e.dest == source:
                    table.discard(e)
        else:
            table.remove_id(sub_id)


class NewSubscriptionTally:
    """What the subscription messages are, counted at every broker that shares one tally (the
    simulator's steady window, weeble.sim.run.Steady; brokers without one count nothing). It
    only counts: no routing decision reads it.

    A new subscription is fresh from its client's first subscribe at its access broker until
    its client's first refresh (or its unsubscription) reaches that broker; every forward of a
    fresh id is one of its first messages, on its way up. Each such forward (one per message
    sent) is one of:

    - `flag1`: another destination held an identical entry here, and each of those had flag 0
      (cleared by the last overrun): counting every entry, Algorithm 1 would not forward it.
      The flag-1 rule of the self-stabilizing identity routing (thesis §3.3.1) sent it;
    - `relayed`: nobody else held f here but the source did, under another id: its interest in f
      was already routed here (no toggle), and the source forwarded this id again (typically its
      own flag-1 forward), so this broker passes it on (the source is never a holder);
    - `toggle`: nobody held f here (the model's toggle: this broker starts routing f);
    - `other`: any other forward (peer-to-peer Algorithm 1 with one holder, renew_forwarded).

    A flag-1 forward is often the one message per overrun period that renews f upstream (the
    refresh it stands in for is then not forwarded), so it is not by itself traffic beyond a
    model that counts one refresh per entry and period. What is beyond it is counted apart:

    - `repeat_new`, `repeat_refresh`: a subscription for f sent to a neighbour that this broker
      already sent one for f in the same overrun period (and no unsubscription since), by a
      fresh id or by a refresh: typically after the one flagged entry of f here was withdrawn
      (its client left) while the rest kept flag 0, or after a refresh from the destination
      of the one flagged entry (π > ρ: a client may refresh twice in a period).
    """

    def __init__(self) -> None:
        self.fresh: set[str] = set()
        self.flag1 = 0
        self.relayed = 0
        self.toggle = 0
        self.other = 0
        self.repeat_new = 0
        self.repeat_refresh = 0

    def counts(self) -> dict[str, int]:
        return {
            "flag1": self.flag1,
            "relayed": self.relayed,
            "toggle": self.toggle,
            "other": self.other,
            "repeat_new": self.repeat_new,
            "repeat_refresh": self.repeat_refresh,
        }

    def subscribed(
        self, scheme: Leasing, source: str, sub_id: str, f: Filter, renewal: bool,
        effects: list[Effect],
    ) -> None:
        plane = scheme.planes[0]
        fresh = self.fresh
        if source not in plane.topo.neighbors:  # from a client: its subscribe or a refresh
            if renewal:
                fresh.discard(sub_id)
            else:
                fresh.add(sub_id)
        new = not renewal and sub_id in fresh
        sent = 0
        period = scheme.period
        last_sent = scheme.last_sent
        for effect in effects:
            if isinstance(effect, Send):
                sent += 1
                key = (f, effect.neighbor)
                if last_sent.get(key) == period:
                    if new:
                        self.repeat_new += 1
                    else:
                        self.repeat_refresh += 1
                else:
                    last_sent[key] = period
        if not new or not sent:
            return
        source_held = others = flagged = False
        for e in plane.table.identical(f):
            if e.sub_id == sub_id and e.dest == source:
                continue  # this subscription's own entry, just inserted
            if e.dest == source:
                source_held = True
            else:
                others = True
                if e.flag:
                    flagged = True
        if others and not flagged:
            self.flag1 += sent
        elif others:
            self.other += sent
        elif source_held:
            self.relayed += sent
        else:
            self.toggle += sent

    def unsubscribed(self, scheme: Leasing, sub_id: str, f: Filter, effects: list[Effect]) -> None:
        self.fresh.discard(sub_id)
        unsub = scheme.strategy.unsub_cls
        for effect in effects:
            # (not a subscription an heir re-sends, Strategy._hand_over: renew_forwarded only)
            if isinstance(effect, Send) and type(effect.message) is unsub:
                scheme.last_sent.pop((f, effect.neighbor), None)


class Leasing:
    wrapper = False

    def __init__(self, strategy: Strategy, ram: ControlRam, topo: Topology,
                 second_chance: bool = True) -> None:
        self.strategy = strategy
        self.second_chance = second_chance  # False: the ablation of Options.second_chance
        self.ram = ram
        self.planes = [Plane(ram.tables[0], 0, topo)]
        # The simulator's steady window only (NewSubscriptionTally): the count of overruns,
        # and per (filter, neighbour) the overrun period of the last subscription sent
        self.tally: NewSubscriptionTally | None = None
        self.period = 0
        self.last_sent: dict[tuple[Filter, str], int] = {}

    def subscribe(self, tag: int, source: str, sub_id: str, f: Filter) -> list[Effect]:
        plane = self.planes[0]
        removed = plane.table.refresh(sub_id, f, source, per_destination=True)  # SC-1
        effects = self.strategy.on_subscribe(plane, source, sub_id, f)
        tally = self.tally
        if tally is not None:
            tally.subscribed(self, source, sub_id, f, bool(removed), effects)
        return effects

    def unsubscribe(self, source: str, sub_id: str, f: Filter, remote: bool) -> list[Effect]:
        withdraw(self.planes, sub_id, f, source, remote)
        effects = self.strategy.on_unsubscribe(self.planes, 0, source, sub_id, f, remote)
        tally = self.tally
        if tally is not None:
            tally.unsubscribed(self, sub_id, f, effects)
        return effects

    def overrun(self) -> tuple[list[Entry], list[Effect]]:
        """SC-2 on the table, what the expiries set off (merging dissolves the mergers an
        expired entry belonged to), then second chance for merger records (spec ch3 §2.6)."""
        plane = self.planes[0]
        table = plane.table
        second_chance = self.second_chance
        self.period += 1
        expired = table.overrun(second_chance)
        mergers = table.mergers
        held = dict(mergers)
        effects = self.strategy.expired(self.planes, plane, expired) if expired else []
        # Only the records held before the expiries: a merger they re-formed (a dissolved
        # merger's rest, sent upstream at once) has flag 0 and, dropped here at once, was never
        # renewed nor withdrawn, so its upstream entries outlived it by 2π (merging1, tree of
        # 15, seed 11: 18.5 s after an `entry.dest` corruption, Δ = 17.2 s)
        for mid in [mid for mid, m in mergers.items()
                    if held.get(mid) is m and (m.flag == 0 or not second_chance)]:
            del mergers[mid]
        for m in mergers.values():
            m.flag = 0
        return expired, effects

    def reset(self, bit: int) -> None:
        """Only the wrapper rebuilds."""
