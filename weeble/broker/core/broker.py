"""The broker: a pure state machine, `Broker.step(now, event) -> list[effect]`.

It runs every routing algorithm of thesis Ch. 3 in its self-stabilizing form:
- leasing with second-chance expiry (SC-1…SC-4, §3.3.1) for flooding, simple, identity,
  covering (variants 1 and 2) and merging (variants 1 and 2), peer-to-peer or hierarchical;
- or the periodic-rebuild wrapper (Algorithm A, §3.4.1) around the same algorithms, with two
  tables T^0/T^1, the rebuild bit a_B and switch messages from the root.

No I/O, no clock reads, no threads: `now` comes in with each event, timers go out as SetTimer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from weeble.broker.core import corruption, merging
from weeble.broker.core.events import (
    ClientPublish,
    ClientSubscribe,
    ClientUnsubscribe,
    Corrupt,
    Deliver,
    Effect,
    Event,
    Receive,
    Send,
    SetTimer,
    Start,
    TimerFired,
    Trace,
)
from weeble.broker.core.filters import Filter
from weeble.broker.core.messages import Notify, Sub, Switch, Unsub
from weeble.broker.core.rom import Algorithm, Rom
from weeble.broker.core.table import RoutingTable

OVERRUN = "overrun"  # SC-2 clock overrun, every π at every broker (leased algorithms)
SWITCH = "switch"  # A5 rebuild switch, every π at the root (wrapper)


class Ram:
    """Everything a fault may corrupt. Any type-correct value is a possible state."""

    __slots__ = ("next_timer", "rebuild_bit", "seen", "tables")

    def __init__(self, n_tables: int) -> None:
        self.tables: list[RoutingTable] = [RoutingTable() for _ in range(n_tables)]
        # The broker clock, as the time of its next overrun: clock(now) = π − (next_timer − now).
        # Under the wrapper it is the root's modulo clock that paces the switches.
        self.next_timer: float = 0.0
        self.rebuild_bit: int = 0  # a_B: the table being rebuilt (wrapper only)
        # A7 idempotence wrapper: (sub_id, source) pairs seen per tag since that table's reset
        self.seen: list[set[tuple[str, str]]] = [set() for _ in range(n_tables)]


class Broker:
    def __init__(self, rom: Rom) -> None:
        self.rom = rom
        self.ram = Ram(2 if rom.wrapper else 1)
        self._neighbors = tuple(sorted(rom.neighbors))
        alg = rom.algorithm
        self._counts_identical = alg is not Algorithm.SIMPLE and alg is not Algorithm.FLOODING
        # Under the wrapper R keeps no flags: every entry counts (flags never drop to 0).
        self._flag1 = rom.options.flag_rule and not rom.wrapper
        self._unsub_flag1 = not rom.options.unsub_counts_all and not rom.wrapper
        self._renew_forwarded = rom.options.renew_forwarded
        # where subscriptions may go: the parent only, under hierarchical routing
        self._upstream = (() if rom.parent is None else (rom.parent,)) if rom.hierarchical \
            else self._neighbors
        self._handlers: dict[type, Callable[[float, Any], list[Effect]]] = {
            Receive: self._on_receive,
            ClientPublish: self._on_client_publish,
            ClientSubscribe: self._on_client_subscribe,
            ClientUnsubscribe: self._on_client_unsubscribe,
            TimerFired: self._on_timer,
            Start: self._on_start,
            Corrupt: self._on_corrupt,
        }

    # ---- the one entry point ----------------------------------------------------------------

    def step(self, now: float, event: Event) -> list[Effect]:
        return self._handlers[type(event)](now, event)

    def clock(self, now: float) -> float:
        """The broker's modulo-π clock at `now` (thesis §3.3.1)."""
        pi = self.rom.params.pi
        return min(max(pi - (self.ram.next_timer - now), 0.0), pi)

    def snapshot(self) -> dict[str, Any]:
        """JSON-able view of ROM and RAM, for admin snapshots and legitimacy checks."""
        rom, ram = self.rom, self.ram
        return {
            "broker": rom.broker_id,
            "algorithm": rom.algorithm.value,
            "hierarchical": rom.hierarchical,
            "wrapper": rom.wrapper,
            "root": rom.root,
            "parent": rom.parent,
            "neighbors": list(self._neighbors),
            "next_timer": ram.next_timer,
            "rebuild_bit": ram.rebuild_bit,
            "tables": [[e.as_dict() for e in t] for t in ram.tables],
            "mergers": [[m.as_dict() for m in t.mergers.values()] for t in ram.tables],
        }

    # ---- timers -----------------------------------------------------------------------------

    def _on_start(self, now: float, event: Start) -> list[Effect]:
        if self.rom.wrapper and not self.rom.is_root:
            return []  # only the root paces rebuilds
        timer = SWITCH if self.rom.wrapper else OVERRUN
        self.ram.next_timer = now + self.rom.params.pi
        return [SetTimer(timer, self.ram.next_timer)]

    def _on_timer(self, now: float, event: TimerFired) -> list[Effect]:
        if now < self.ram.next_timer - 1e-9:
            return []  # superseded (the clock was changed since this timer was set)
        self.ram.next_timer = now + self.rom.params.pi
        if event.timer == OVERRUN and not self.rom.wrapper:
            effects = self._overrun()
        elif event.timer == SWITCH and self.rom.wrapper and self.rom.is_root:
            effects = self._rebuild(1 - self.ram.rebuild_bit, exclude=None)  # A5
        else:
            return []
        effects.append(SetTimer(event.timer, self.ram.next_timer))
        return effects

    def _overrun(self) -> list[Effect]:
        """SC-2 on the table, and second chance for merger records too (§3.3.1, §2.6 of spec)."""
        expired = self.ram.tables[0].overrun()
        merging.overrun(self.ram.tables[0].mergers)
        if not expired:
            return []
        return [Trace("expire", {"count": len(expired), "entries": [e.as_dict() for e in expired]})]

    def _rebuild(self, bit: int, exclude: str | None) -> list[Effect]:
        """A5/A6: start rebuilding table `bit` from the initial (empty) configuration."""
        ram = self.ram
        ram.rebuild_bit = bit
        ram.tables[bit].clear()
        ram.seen[bit].clear()
        effects: list[Effect] = [Send(n, Switch(bit)) for n in self._neighbors if n != exclude]
        effects.append(Trace("switch", {"tag": bit}))
        return effects

    # ---- notifications ----------------------------------------------------------------------

    def _on_client_publish(self, now: float, event: ClientPublish) -> list[Effect]:
        return self._route(Notify(event.notification), event.client)

    def _route(self, message: Notify, source: str) -> list[Effect]:
        """Forward a notification; the incoming message object is passed on (hot path)."""
        rom = self.rom
        n = message.notification
        attrs = n.attributes
        dests: dict[str, None] = {}
        for table in self.ram.tables:  # A1: the union of both tables under the wrapper
            table.match(attrs, dests)
        neighbors = rom.neighbors
        if rom.algorithm is Algorithm.FLOODING:
            effects: list[Effect] = [Send(b, message) for b in self._neighbors if b != source]
            # only local entries are legitimate; one that names a neighbour would duplicate
            effects.extend(Deliver(c, n) for c in dests if c not in neighbors and c != source)
            return effects
        if rom.hierarchical and rom.parent is not None and source != rom.parent:
            dests[rom.parent] = None  # every notification climbs to the root
        effects = []
        for d in dests:
            if d == source:
                continue
            effects.append(Send(d, message) if d in neighbors else Deliver(d, n))
        return effects

    # ---- messages from neighbours -----------------------------------------------------------

    def _on_receive(self, now: float, event: Receive) -> list[Effect]:
        source, msg = event.neighbor, event.message
        if source not in self.rom.neighbors:
            return [Trace("garbage", {"from": source, "why": "not a neighbour"})]
        kind = type(msg)
        if kind is Notify:
            return self._route(msg, source)
        if kind is Sub:
            return self._subscribe(self._tag(msg.tag), source, msg.sub_id, msg.filter)
        if kind is Unsub:
            return self._unsubscribe(self._tag(msg.tag), source, msg.sub_id, msg.filter)
        if kind is Switch and self.rom.wrapper:
            if msg.tag not in (0, 1):
                return [Trace("garbage", {"from": source, "why": f"switch tag {msg.tag}"})]
            return self._rebuild(msg.tag, exclude=source)  # A6
        return [Trace("garbage", {"from": source, "why": f"unexpected {kind.__name__}"})]

    def _unexpected_control(self, neighbor: str) -> bool:
        """Flooding keeps local entries only; hierarchical subscriptions never come down."""
        rom = self.rom
        return rom.algorithm is Algorithm.FLOODING or (rom.hierarchical and neighbor == rom.parent)

    def _tag(self, tag: int) -> int:
        """A3: the table a tagged control message belongs to (always T^0 without the wrapper)."""
        return tag & 1 if self.rom.wrapper else 0

    # ---- client requests --------------------------------------------------------------------

    def _on_client_subscribe(self, now: float, event: ClientSubscribe) -> list[Effect]:
        if event.client in self.rom.neighbors:
            return [Trace("garbage", {"from": event.client, "why": "client id is a neighbour"})]
        # A2: run R on the table being rebuilt
        return self._subscribe(self.ram.rebuild_bit, event.client, event.sub_id, event.filter)

    def _on_client_unsubscribe(self, now: float, event: ClientUnsubscribe) -> list[Effect]:
        if event.client in self.rom.neighbors:
            return [Trace("garbage", {"from": event.client, "why": "client id is a neighbour"})]
        return self._unsubscribe(self.ram.rebuild_bit, event.client, event.sub_id, event.filter)

    # ---- routing: subscriptions -------------------------------------------------------------

    def _subscribe(self, tag: int, source: str, sub_id: str, f: Filter) -> list[Effect]:
        rom, ram = self.rom, self.ram
        remote = source in rom.neighbors
        if remote and self._unexpected_control(source):
            return [Trace("garbage", {"from": source, "why": "subscription not expected"})]
        if tag >= len(ram.tables):
            tag = 0
        if rom.wrapper:  # A7: a repeated subscription within the period is dropped
            key = (sub_id, source)
            if key in ram.seen[tag]:
                return []
            ram.seen[tag].add(key)
        table = ram.tables[tag]
        table.refresh(sub_id, f, source)  # SC-1
        if rom.algorithm is Algorithm.FLOODING:
            return []
        if rom.algorithm.merging:
            return merging.on_subscribe(self, table, tag, source, sub_id, f)
        targets = self.sub_targets(table, f, source)
        return [Send(n, Sub(sub_id, f, tag)) for n in targets]

    def sub_targets(self, table: RoutingTable, f: Filter, source: str) -> list[str]:
        """Where a (re)subscription for f from `source` goes (§2.3–2.5 of the spec).

        Identity, covering, merging: Algorithm 1 with flag-1 counting decides; and a refresh
        from the destination whose subscription was last forwarded for f to a neighbour goes
        there again, so that neighbour's entry is renewed every ρ like a client's
        (Options.renew_forwarded). Keyed by destination, not sub_id: a downstream broker may
        hand its interest over to another subscription id at any time.
        """
        if not self._counts_identical:  # simple routing floods every subscription
            return self._spread(source)
        holders = self.holders(table, f, source, flag1=self._flag1)
        targets = self._algorithm1(holders, source)
        if self._renew_forwarded:
            forwarded = table.forwarded
            for n in self._upstream:
                if n != source and n not in targets and forwarded.get((f, n)) == source:
                    targets.append(n)
            for n in targets:
                forwarded[f, n] = source
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
        if self.rom.algorithm.covering:
            any_flag = self.rom.algorithm is Algorithm.COVERING2 or not flag1
            for g in table.filters():
                if g != f and g.covers(f):
                    for e in table.identical(g):
                        if e.dest != source and (e.flag or any_flag):
                            found[e.dest] = None
        return found

    def _algorithm1(self, holders: dict[str, None], source: str) -> list[str]:
        """Algorithm 1 (l.1275–1299); hierarchical form: forward up iff nobody else holds f."""
        rom = self.rom
        if rom.hierarchical:
            if holders or rom.parent is None or source == rom.parent:
                return []
            return [rom.parent]
        if not holders:
            return [n for n in self._neighbors if n != source]
        if len(holders) == 1:
            (only,) = holders
            return [only] if only in rom.neighbors else []
        return []

    def _spread(self, source: str) -> list[str]:
        rom = self.rom
        if rom.hierarchical:
            return [rom.parent] if rom.parent is not None and source != rom.parent else []
        return [n for n in self._neighbors if n != source]

    # ---- routing: unsubscriptions -----------------------------------------------------------

    def _unsubscribe(self, tag: int, source: str, sub_id: str, f: Filter) -> list[Effect]:
        rom, ram = self.rom, self.ram
        remote = source in rom.neighbors
        if remote and self._unexpected_control(source):
            return [Trace("garbage", {"from": source, "why": "unsubscription not expected"})]
        # A4: under the wrapper apply it to both tables, tag what it generates with a_B
        tables = ram.tables if rom.wrapper else ram.tables[:1]
        out_tag = ram.rebuild_bit if rom.wrapper else tag
        alg = rom.algorithm
        for table in tables:
            table.remove_id(sub_id)  # SC-3
        for seen in ram.seen:  # A7: a later subscription with this id is new again
            seen.discard((sub_id, source))
        if alg is Algorithm.FLOODING:
            return []
        if alg is Algorithm.SIMPLE:
            return [Send(n, Unsub(sub_id, f, out_tag)) for n in self._spread(source)]
        effects: list[Effect] = []
        for table in tables:
            if remote:
                # The neighbour forwards an unsubscription only when it has no identical or
                # covering interest left, so every identical entry for it is obsolete.
                for e in [e for e in table.identical(f) if e.dest == source]:
                    table.discard(e)
            if alg.merging:
                effects.extend(merging.on_unsubscribe(self, table, out_tag, source, f))
            if alg.covering:  # merging too: it is covering with mergers on top
                effects.extend(self.uncovered(table, out_tag, f))
        # One decision over both tables: R run on the table being rebuilt alone would find no
        # other holder there and withdraw an interest the complete table still has.
        withdrawn = self.unsub_targets(f, source)
        for table in tables:
            effects.extend(self._hand_over(table, out_tag, f, source, withdrawn))
        effects.extend(Send(n, Unsub(sub_id, f, out_tag)) for n in withdrawn)
        unique: list[Effect] = []
        for effect in effects:
            if effect not in unique:  # both tables may ask for the same message
                unique.append(effect)
        return unique

    def _hand_over(
        self, table: RoutingTable, tag: int, f: Filter, gone: str, withdrawn: list[str]
    ) -> list[Effect]:
        """The destination that renewed a neighbour's entry for f has no f left, but others
        do: the next one takes over now, not after the next overrun."""
        if any(e.dest == gone for e in table.identical(f)):
            return []  # `gone` still holds f under another subscription id
        effects: list[Effect] = []
        for n in self._upstream:
            if table.forwarded.get((f, n)) != gone:
                continue
            del table.forwarded[f, n]
            if n in withdrawn:
                continue
            heir = next((e for e in table.identical(f) if e.dest != n), None)
            if heir is not None:
                table.forwarded[f, n] = heir.dest
                effects.append(Send(n, Sub(heir.sub_id, f, tag)))
        return effects

    def unsub_targets(self, f: Filter, source: str) -> list[str]:
        """Where an unsubscription goes: the same i-based rule as subscriptions (l.1266),
        counting holders in every table (both, under the wrapper)."""
        holders: dict[str, None] = {}
        for table in self.ram.tables:
            holders |= self.holders(table, f, source, flag1=self._unsub_flag1)
        return self._algorithm1(holders, source)

    def uncovered(self, table: RoutingTable, tag: int, f: Filter) -> list[Effect]:
        """Covering: f leaves; the subscriptions it covered must now reach every neighbour.

        Algorithm 1 alone is not enough here: a covered subscription that arrived while f was
        held was never forwarded, and identical ones that came after it counted it as a holder
        (i ≥ 2) and were not forwarded either. So each neighbour that has no renewer for the
        uncovered filter gets one now, and keeps it through sub_targets' renewal rule.
        """
        effects: list[Effect] = []
        done: set[tuple[Filter, str]] = set()
        for g in [g for g in table.filters() if g != f and f.covers(g)]:
            for e in list(table.identical(g)):
                if (g, e.dest) in done:
                    continue
                done.add((g, e.dest))
                targets = self.sub_targets(table, g, e.dest)
                for n in self._upstream:
                    if n != e.dest and n not in targets and not self._renewed(table, g, n):
                        table.forwarded[g, n] = e.dest
                        targets.append(n)
                effects.extend(Send(n, Sub(e.sub_id, g, tag)) for n in targets)
        return effects

    def _renewed(self, table: RoutingTable, g: Filter, n: str) -> bool:
        """Does some destination other than n still renew neighbour n's entry for g?"""
        d = table.forwarded.get((g, n))
        return d is not None and d != n and any(e.dest == d for e in table.identical(g))

    # ---- faults -----------------------------------------------------------------------------

    def _on_corrupt(self, now: float, event: Corrupt) -> list[Effect]:
        return corruption.apply(self, now, event)

    # ---- introspection helpers used by legitimacy checks and tests --------------------------

    def pairs(self) -> set[tuple[Filter, str]]:
        """Union over tables of the (filter, destination) pairs."""
        out: set[tuple[Filter, str]] = set()
        for table in self.ram.tables:
            out |= table.pairs()
        return out

    def entries(self) -> Iterable[tuple[int, Any]]:
        for tag, table in enumerate(self.ram.tables):
            for e in table:
                yield tag, e
