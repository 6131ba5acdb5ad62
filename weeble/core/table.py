"""A leased routing table: entries ⟨sub_id, filter, destination, flag⟩ (thesis §3.3.1).

One `RoutingTable` is one table. The broker keeps a list of them: one for the leased algorithms,
T^0 and T^1 for the periodic-rebuild wrapper, and (later) one per color of the 3-color scheme.

Three indexes keep the hot paths off full scans:
- by sub_id, for SC-1/SC-3 ("remove every entry with that ID");
- by filter, for identity-based counting ("destinations with an identical entry");
- by (attribute, value) of an equality constraint, for matching a notification.
Entries without an equality constraint sit in a small residual set that matching scans.

Matching also keeps, per index key, the distinct destinations of its bucket when every entry
there is decided by the key alone (the common `class == k`): a notification then costs one
lookup and a walk over a few destinations, not over the entries. Every change of a bucket goes
through `add`/`discard`/`clear`, which drop its cached destinations.

Those cached destinations are kept by key first, then by table (`KeyIndex`, one per distinct
index key that some table holds, shared by the tables of one `KeyCache`), not in a dict per
table: a notification is routed by ~100 brokers within a fraction of a second, and the copies
that reach the children of one broker are routed one after the other, so the one small record
of its key stays in the processor's cache from hop to hop, where a dict per table is cold at
every hop (the seed-000 simulation: 121 tables of 1,000 keys each). Who shares a `KeyCache`
is its owner's choice, not the process's: the simulator gives one to all the brokers of a run, a
broker created alone has its own. It is a cache and nothing else: which entries a table holds,
and what it answers, are the same as without it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import suppress
from dataclasses import dataclass

from weeble.core.filters import Filter, IndexKey, Value, notification_index_keys


class Entry:
    """One routing entry. Mutable only through RoutingTable (the indexes must follow)."""

    __slots__ = ("dest", "exact", "filter", "flag", "key", "sub_id")

    def __init__(self, sub_id: str, filter: Filter, dest: str, flag: int = 1) -> None:
        self.sub_id = sub_id
        self.filter = filter
        self.dest = dest
        self.flag = flag
        self.key = filter.index_key()
        # the index key alone decides the match (the common `class == k`): skip matches()
        self.exact = self.key is not None and len(filter.constraints) == 1

    def as_dict(self) -> dict[str, object]:
        return {"sub_id": self.sub_id, "filter": str(self.filter), "dest": self.dest,
                "flag": self.flag}

    def __repr__(self) -> str:
        return f"Entry({self.sub_id!r}, {str(self.filter)!r}, {self.dest!r}, {self.flag})"


@dataclass(slots=True)
class Merger:
    """A merger record of merging-based routing (routing/merging.py): kept in RAM beside the
    table it merges, with a second-chance flag like the entries."""

    merger_id: str
    filter: Filter
    dest: str
    constituents: frozenset[Filter]
    flag: int = 1

    def as_dict(self) -> dict[str, object]:
        return {"merger_id": self.merger_id, "filter": str(self.filter), "dest": self.dest,
                "constituents": sorted(str(c) for c in self.constituents), "flag": self.flag}


class KeyIndex:
    """What the tables of one `KeyCache` know of one index key: per table (by its number), the
    distinct destinations of the table's bucket for the key in entry order, when that bucket
    is exact, or () when the table has no bucket for it (absent: not known, or not exact)."""

    __slots__ = ("dests", "key", "tables")

    def __init__(self, key: IndexKey) -> None:
        self.key = key  # the canonical key object (see `KeyCache.canonical`)
        self.dests: dict[int, tuple[str, ...]] = {}
        self.tables = 0  # how many tables have a bucket for the key; none: the record goes


class KeyCache:
    """The `KeyIndex` records of the tables that share them: index key -> its record, while
    some table of the cache has a bucket for the key. Owned by whoever makes the brokers (see
    the module doc); it lives and dies with its owner."""

    __slots__ = ("numbered", "records")

    def __init__(self) -> None:
        self.records: dict[IndexKey, KeyIndex] = {}
        self.numbered = 0  # tables numbered so far: a number is never reused

    def number(self) -> int:
        """A new table's number in the records (a dead table's cache is never read)."""
        n = self.numbered
        self.numbered = n + 1
        return n

    def canonical(self, keys: list[IndexKey]) -> list[IndexKey]:
        """A notification's index keys, each replaced by the equal key object that the tables
        hold (if any holds it): every later probe with it then hits by identity."""
        records = self.records
        out: list[IndexKey] = []
        for key in keys:
            known = records.get(key)
            out.append(key if known is None else known.key)
        return out


class RoutingTable:
    __slots__ = ("_by_filter", "_by_id", "_by_key", "_keys", "_number", "_residual",
                 "forwarded", "loaned", "mergers")

    def __init__(self, keys: KeyCache | None = None) -> None:
        # (filter, neighbour) -> the destination whose refreshes keep renewing that neighbour's
        # entry (see Broker.sub_targets). Routing state, so it lives and dies with the table.
        self.forwarded: dict[tuple[Filter, str], str] = {}
        self.mergers: dict[str, Merger] = {}  # merging-based routing: merger records by id
        # (destination, filter) re-sent on the destination's account (a dissolved merger's
        # constituents, a renewal handed over, a subscription sent after a new advertisement),
        # until their destination refreshes them (withdrawn if they expire first)
        self.loaned: dict[tuple[str, Filter], None] = {}
        # dicts keyed by entry object, used as ordered sets (deterministic iteration)
        self._by_id: dict[str, dict[Entry, None]] = {}
        self._by_filter: dict[Filter, dict[Entry, None]] = {}
        self._by_key: dict[IndexKey, dict[Entry, None]] = {}
        self._residual: dict[Entry, None] = {}
        # this table's number in the `KeyIndex` records of its cache (its own, if none is
        # given), which keep per index key the distinct destinations of its bucket (see
        # `match`); dropped whenever the bucket changes
        cache = keys if keys is not None else KeyCache()
        self._keys: dict[IndexKey, KeyIndex] = cache.records
        self._number: int = cache.number()

    # ---- raw insert/remove (keep the indexes consistent) ------------------------------------

    def add(self, entry: Entry) -> None:
        self._by_id.setdefault(entry.sub_id, {})[entry] = None
        self._by_filter.setdefault(entry.filter, {})[entry] = None
        key = entry.key
        if key is None:
            self._residual[entry] = None
            return
        bucket = self._by_key.get(key)
        records = self._keys
        known = records.get(key)
        if known is None:
            known = records[key] = KeyIndex(key)
        if bucket is None:
            bucket = self._by_key[key] = {}
            known.tables += 1
        bucket[entry] = None
        known.dests.pop(self._number, None)

    def discard(self, entry: Entry) -> None:
        _pop(self._by_id, entry.sub_id, entry)
        _pop(self._by_filter, entry.filter, entry)
        key = entry.key
        if key is None:
            self._residual.pop(entry, None)
            return
        bucket = self._by_key.get(key)
        if bucket is None or entry not in bucket:
            return
        del bucket[entry]
        known = self._keys.get(key)
        if known is None:  # not reached: a bucket's key has its record
            return
        known.dests.pop(self._number, None)
        if not bucket:
            del self._by_key[key]
            _release(self._keys, known)

    # ---- second-chance operations -----------------------------------------------------------

    def refresh(self, sub_id: str, filter: Filter, dest: str,
                per_destination: bool = False) -> list[Entry]:
        """SC-1: remove every entry with this id (whatever its contents), insert it with flag 1.

        With `per_destination`, only this destination's entries with the id go; entries with
        the id towards other destinations stay until they expire (second chance) or are
        withdrawn. The routing schemes use it for every (re)subscription: in a static tree all
        entries of one id point the same way, so nothing changes there; across a link exchange
        the new route of a subscription is installed while its old route still carries the
        black traffic (thesis 4.4.2), and with identity-based routing one id may stand for the
        interest of a whole subtree, so moving the id would take that interest away.

        Returns the entries removed, so callers can tell a refresh from a new subscription.
        """
        bucket = self._by_id.get(sub_id)
        if bucket is not None and len(bucket) == 1:
            # The common refresh: the one entry already says this. Same outcome, no re-indexing.
            entry = next(iter(bucket))
            if entry.dest == dest and (entry.filter is filter or entry.filter == filter):
                entry.flag = 1
                return [entry]
        if per_destination and bucket:
            removed = [e for e in bucket if e.dest == dest]
            for e in removed:
                self.discard(e)
        else:
            removed = self.remove_id(sub_id)
        self.add(Entry(sub_id, filter, dest, 1))
        return removed

    def remove_id(self, sub_id: str) -> list[Entry]:
        """SC-3: remove every entry with this id."""
        bucket = self._by_id.get(sub_id)
        if not bucket:
            return []
        removed = list(bucket)
        for entry in removed:
            self.discard(entry)
        return removed

    def overrun(self, second_chance: bool = True) -> list[Entry]:
        """SC-2: delete every flag-0 entry, then set every remaining flag to 0. Without the
        second chance (an ablation, Options.second_chance) every entry goes."""
        expired = [e for bucket in self._by_id.values() for e in bucket
                   if e.flag == 0 or not second_chance]
        for entry in expired:
            self.discard(entry)
        if expired:  # forget renewers that hold the filter no more
            self.forwarded = {
                (f, n): d for (f, n), d in self.forwarded.items()
                if any(e.dest == d for e in self.identical(f))
            }
        for bucket in self._by_id.values():
            for entry in bucket:
                entry.flag = 0
        return expired

    def __del__(self) -> None:
        # The records are shared by the tables of the cache (a run's brokers, restarted ones
        # too): a table that dies leaves no cached destinations and no count behind. At
        # interpreter exit the module may be gone first.
        with suppress(Exception):
            _forget(self._keys, self._number, self._by_key)

    def clear(self) -> None:
        self.forwarded.clear()
        self.loaned.clear()
        self.mergers.clear()
        self._by_id.clear()
        self._by_filter.clear()
        number = self._number
        records = self._keys
        for key in self._by_key:
            known = records.get(key)
            if known is not None:
                known.dests.pop(number, None)
                _release(records, known)
        self._by_key.clear()
        self._residual.clear()

    # ---- queries ----------------------------------------------------------------------------

    def match(self, attributes: Mapping[str, Value], dests: dict[str, None],
              keys: list[IndexKey] | None = None) -> dict[str, None]:
        """Add to `dests` every destination with an entry matching the notification (`keys`:
        its `notification_index_keys`, if the caller has them already).

        A dict used as an ordered set: iteration order must not depend on string hashing, or the
        simulator would not be deterministic across processes.
        """
        by_key = self._by_key
        if by_key:
            if keys is None:
                keys = notification_index_keys(attributes)
            for key in keys:
                found = self._bucket(key)
                if found is None:  # not exact: each entry against the notification
                    for entry in by_key[key]:
                        if entry.dest not in dests and (
                            entry.exact or entry.filter.matches(attributes)
                        ):
                            dests[entry.dest] = None
                    continue
                for dest in found:
                    if dest not in dests:
                        dests[dest] = None
        for entry in self._residual:
            if entry.dest not in dests and entry.filter.matches(attributes):
                dests[entry.dest] = None
        return dests

    def match_keys(self, keys: list[IndexKey]) -> tuple[str, ...] | None:
        """`match` for a notification with the index keys `keys`, when the index alone answers
        (no residual entries, the bucket of every key exact): its destinations, distinct, in
        the order `match` adds them. None when it takes `match`."""
        if self._residual:
            return None
        out: tuple[str, ...] = ()
        for key in keys:
            found = self._bucket(key)
            if found is None:
                return None
            if found:
                # the keys' destinations one after the other, each once (rarely more than one
                # key has any)
                out = tuple(dict.fromkeys(out + found)) if out else found
        return out

    def _bucket(self, key: IndexKey) -> tuple[str, ...] | None:
        """What this table's bucket for the index key `key` answers by itself: its distinct
        destinations in entry order when every entry in it is exact (kept in the key's
        `KeyIndex` record until the bucket changes), () when the table has no bucket for the
        key, None when some entry must be matched against the notification."""
        known = self._keys.get(key)
        if known is None:
            return ()  # no table has a bucket for the key
        number = self._number
        found = known.dests.get(number)
        if found is None:
            bucket = self._by_key.get(key)
            if not bucket:
                found = ()
            elif not all(entry.exact for entry in bucket):
                return None
            else:
                # the same destinations, in the same order, as the walk over the entries
                found = tuple(dict.fromkeys(entry.dest for entry in bucket))
            known.dests[number] = found
        return found

    def identical(self, filter: Filter) -> Iterable[Entry]:
        """Entries whose filter is identical to `filter`."""
        return self._by_filter.get(filter, {}).keys()

    def filters(self) -> Iterable[Filter]:
        """The distinct filters in the table."""
        return self._by_filter.keys()

    def with_id(self, sub_id: str) -> list[Entry]:
        return list(self._by_id.get(sub_id, ()))

    def __iter__(self) -> Iterator[Entry]:
        for bucket in self._by_id.values():
            yield from bucket

    def __len__(self) -> int:
        return sum(len(bucket) for bucket in self._by_id.values())

    def pairs(self) -> set[tuple[Filter, str]]:
        """The (filter, destination) pairs in the table: the routing configuration, ids aside."""
        return {(e.filter, e.dest) for e in self}


def _forget(records: dict[IndexKey, KeyIndex], number: int, held: Iterable[IndexKey]) -> None:
    """Table `number` of the cache `records`, holding buckets for the keys `held`, is gone."""
    for key in held:
        known = records.get(key)
        if known is not None:
            _release(records, known)
    for known in records.values():
        known.dests.pop(number, None)


def _release(records: dict[IndexKey, KeyIndex], known: KeyIndex) -> None:
    """A table no longer has a bucket for the key: the last one drops the record."""
    known.tables -= 1
    if known.tables <= 0:
        records.pop(known.key, None)


def _pop(index: dict, key: object, entry: Entry) -> None:
    bucket = index.get(key)
    if bucket is not None:
        bucket.pop(entry, None)
        if not bucket:
            del index[key]
