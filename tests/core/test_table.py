"""Second-chance leasing on one routing table (spec ch3 §2.1, claim 1)."""

from weeble.core.filters import Filter
from weeble.core.table import Entry, KeyCache, RoutingTable

A = Filter.equals("class", 1)
B = Filter.equals("class", 2)


def test_refresh_replaces_every_entry_with_the_same_id() -> None:
    t = RoutingTable()
    t.add(Entry("s1", B, "x", 0))
    t.add(Entry("s1", A, "y", 1))  # corrupted duplicate id
    removed = t.refresh("s1", A, "z")
    assert len(removed) == 2
    assert [(e.sub_id, e.filter, e.dest, e.flag) for e in t] == [("s1", A, "z", 1)]


def test_unrefreshed_entry_survives_one_overrun_and_dies_at_the_second() -> None:
    t = RoutingTable()
    t.refresh("s1", A, "x")
    assert t.overrun() == [] and len(t) == 1 and next(iter(t)).flag == 0
    assert [e.sub_id for e in t.overrun()] == ["s1"] and len(t) == 0


def test_entry_refreshed_between_every_two_overruns_never_expires() -> None:
    t = RoutingTable()
    for _ in range(10):
        t.refresh("s1", A, "x")
        assert t.overrun() == []
    assert len(t) == 1


def test_flag0_entry_is_gone_at_the_next_overrun() -> None:
    t = RoutingTable()
    t.add(Entry("bogus", A, "x", 0))
    assert [e.sub_id for e in t.overrun()] == ["bogus"]


def test_match_uses_index_and_residual_and_deduplicates_destinations() -> None:
    t = RoutingTable()
    t.refresh("s1", A, "x")
    t.refresh("s2", A, "x")
    t.refresh("s3", Filter.parse("class > 0"), "y")  # no equality: residual
    t.refresh("s4", B, "z")
    dests: dict[str, None] = {}
    t.match({"class": 1}, dests)
    assert list(dests) == ["x", "y"]


def test_remove_id_and_pairs() -> None:
    t = RoutingTable()
    t.refresh("s1", A, "x")
    t.refresh("s2", B, "x")
    assert t.pairs() == {(A, "x"), (B, "x")}
    t.remove_id("s1")
    assert t.pairs() == {(B, "x")}
    assert list(t.identical(A)) == []


def test_match_keys_answers_as_match_does_or_defers_to_it() -> None:
    """`match_keys` (the shortcut of Routing.on_notify) gives match's destinations in match's
    order whenever it answers, also when several keys of one notification have destinations,
    and defers (None) when a bucket or the residual set needs the filters themselves, through
    random table changes."""
    import random

    from weeble.core.filters import notification_index_keys

    rng = random.Random(7)
    # exact buckets (on two attributes), one that is not (class 1), and a residual entry
    # (sub "r") now and then
    filters = ([Filter.equals("class", c) for c in range(4)] + [Filter.equals("x", 3)]
               + [Filter.parse("class == 1 && x > 2")])
    t = RoutingTable()
    answered = deferred = several = 0
    for step in range(600):
        sub = f"s{rng.randrange(30)}"
        if rng.random() < 0.05:
            t.refresh("r", Filter.parse("x > 2"), rng.choice("abcde"))
        elif rng.random() < 0.1:
            t.remove_id("r")
        elif rng.random() < 0.3:
            t.remove_id(sub)
        else:
            t.refresh(sub, rng.choice(filters), rng.choice("abcde"),
                      per_destination=rng.random() < 0.5)
        attrs = {"class": rng.randrange(4), "x": rng.choice([1, 3])}
        if rng.random() < 0.5:
            attrs = dict(reversed(attrs.items()))  # the keys in either order
        got = t.match_keys(notification_index_keys(attrs))
        if got is None:
            deferred += 1
            continue
        answered += 1
        want = list(t.match(attrs, {}))
        assert list(got) == want, step
        several += sum(bool(t.match({k: v}, {})) for k, v in attrs.items()) > 1
    assert answered > 50 and deferred > 50 and several > 20


def test_cached_destinations_are_per_table_through_changes_of_any_table() -> None:
    """The destinations cached per index key are shared by the tables of a process (by key
    first, then by table): each table answers `match_keys` with its own entries, in entry order,
    whatever the other tables hold, add, remove or clear (also a key the last table drops and a
    later one adds again)."""
    import random

    from weeble.core.filters import notification_index_keys

    rng = random.Random(11)
    filters = [Filter.equals("class", c) for c in range(3)]
    cache = KeyCache()  # the tables share their index records, as a simulation's brokers do
    tables = [RoutingTable(cache) for _ in range(3)]
    for step in range(600):
        t = rng.choice(tables)
        r = rng.random()
        if r < 0.02:
            t.clear()
        elif r < 0.3:
            t.remove_id(f"s{rng.randrange(20)}")
        else:
            t.refresh(f"s{rng.randrange(20)}", rng.choice(filters), rng.choice("abcd"),
                      per_destination=rng.random() < 0.5)
        c = rng.randrange(4)  # class 3: no table has it
        (key,) = notification_index_keys({"class": c})
        for u in tables:
            # the bucket's entries in insertion order, read without the cache
            bucket = u._by_key.get(key, {})  # type: ignore[attr-defined]
            want = list(dict.fromkeys(e.dest for e in bucket))
            assert set(want) == {e.dest for e in u if e.filter == Filter.equals("class", c)}
            assert list(u.match_keys([key]) or ()) == want, step
            assert list(u.match({"class": c}, {}, [key])) == want, step


def test_a_table_that_dies_leaves_no_cached_destinations_behind() -> None:
    """The per-key records are shared by the tables of one cache (a simulation's brokers,
    restarted ones too): a dropped table's counts and cached destinations go with it, and a
    key no live table holds has no record."""
    import gc

    from weeble.core.filters import notification_index_keys

    (held,) = notification_index_keys({"class": 424242})
    (other,) = notification_index_keys({"class": 424243})
    cache = KeyCache()
    keep, gone = RoutingTable(cache), RoutingTable(cache)
    keep.refresh("k", Filter.equals("class", 424242), "x")
    gone.refresh("g", Filter.equals("class", 424242), "y")
    gone.refresh("h", Filter.equals("class", 424243), "z")
    assert gone.match_keys([held]) == ("y",) and gone.match_keys([other]) == ("z",)
    assert keep.match_keys([held]) == ("x",) and keep.match_keys([other]) == ()
    number = gone._number  # type: ignore[attr-defined]
    del gone
    gc.collect()
    records = cache.records
    assert other not in records  # no live table holds it
    assert records[held].tables == 1
    assert all(number not in r.dests for r in records.values())
    assert keep.match_keys([held]) == ("x",) and keep.match_keys([other]) == ()
    del keep
    gc.collect()
    assert held not in records


def test_the_index_cache_is_its_owners_not_the_processs() -> None:
    """Two brokers made alone share no index record: the cache is the owner's (a simulation
    gives one to all its brokers), not state of the process."""
    from weeble.core.broker import Broker
    from weeble.core.rom import Algorithm, Params, Rom

    def broker(keys: KeyCache | None = None) -> Broker:
        params = Params(pi=1.0, rho=1.0, delta_min=0.001, delta_max=0.01, d=4)
        return Broker(Rom(broker_id="b1", neighbors=frozenset({"b0"}), root="b0", parent="b0",
                          algorithm=Algorithm.IDENTITY, params=params), keys)

    alone, other = broker(), broker()
    shared = KeyCache()
    first, second = broker(shared), broker(shared)
    assert alone.keys is not other.keys and first.keys is second.keys is shared
    for b in (alone, first):
        b.ram.tables[0].refresh("s", Filter.equals("class", 7), "b0")
    assert len(alone.keys.records) == 1 and not other.keys.records
    assert len(shared.records) == 1
