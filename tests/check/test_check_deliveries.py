"""The delivery rules of `weeble.check.deliveries` (R4-R7) against a brute-force reading of them.

`Deliveries` judges online with bounded memory (publications retire `retention` s after they
were published; R7 is judged against the pending publications of the same publisher): these
tests hold its counts to a model that remembers everything, on random histories with
duplicates, reordering, late and phantom deliveries.
"""

from __future__ import annotations

import math
import random

import pytest

from weeble.check.deliveries import Deliveries


def model(pubs: list[tuple[float, str, int]], deliveries: list[tuple[float, str, str, int]],
          retention: float) -> dict[str, int]:
    """R5-R7 by brute force over the whole history, publications and deliveries in time order
    (publications first at equal times, as a publication precedes its deliveries)."""
    events = sorted([(t, 0, ("pub", p, s, "")) for t, p, s in pubs]
                    + [(t, 1, ("del", p, s, c)) for t, c, p, s in deliveries],
                    key=lambda e: (e[0], e[1]))
    published: dict[tuple[str, int], float] = {}
    latest = -math.inf  # the latest publication: a publication retires behind it
    firsts: set[tuple[str, str, int]] = set()
    highest: dict[tuple[str, str], int] = {}
    out = dict.fromkeys(("deliveries", "duplicate", "fifo", "late", "phantom"), 0)
    for t, _, (what, publisher, seq, client) in events:
        if what == "pub":
            published[(publisher, seq)] = t
            latest = max(latest, t)
            continue
        out["deliveries"] += 1
        born = published.get((publisher, seq))
        if born is None:
            out["phantom"] += 1
        elif born < latest - retention:
            out["late"] += 1
        elif (client, publisher, seq) in firsts:
            out["duplicate"] += 1
        else:
            firsts.add((client, publisher, seq))
            if seq < highest.get((client, publisher), 0):
                out["fifo"] += 1
            else:
                highest[(client, publisher)] = seq
    return out


def history(rng: random.Random, *, in_order: bool) -> tuple[
        list[tuple[float, str, int]], list[tuple[float, str, str, int]]]:
    publishers, clients = ["p1", "p2", "p3"], [f"c{i}" for i in range(6)]
    pubs: list[tuple[float, str, int]] = []
    count = dict.fromkeys(publishers, 0)
    t = 0.0
    for _ in range(60):
        t += rng.expovariate(4.0)
        p = rng.choice(publishers)
        count[p] += 1
        pubs.append((t, p, count[p]))
    if not in_order:  # numbered out of publication order (a programmatic publisher)
        times = sorted(x[0] for x in pubs)
        rng.shuffle(times)
        pubs = [(times[i], p, s) for i, (_, p, s) in enumerate(pubs)]
    deliveries = []
    for t_p, p, s in pubs:
        for c in rng.sample(clients, rng.randint(0, len(clients))):
            for _ in range(rng.choice([1, 1, 1, 2])):  # a duplicate now and then
                deliveries.append((t_p + rng.expovariate(2.0), c, p, s))
    for _ in range(5):  # never published
        deliveries.append((rng.uniform(0, t), rng.choice(clients), "p1", 10_000))
    return pubs, deliveries


def judge(pubs: list[tuple[float, str, int]], deliveries: list[tuple[float, str, str, int]],
          retention: float) -> dict[str, int]:
    d = Deliveries(activation=0.5, deactivation=0.5, crash_linger=1.0, retention=retention)
    events = sorted([(t, 0, ("pub", p, s, "")) for t, p, s in pubs]
                    + [(t, 1, ("del", p, s, c)) for t, c, p, s in deliveries],
                    key=lambda e: (e[0], e[1]))
    for t, _, (what, publisher, seq, client) in events:
        if what == "pub":
            d.publish(t, publisher, publisher, seq, {"class": 1})
        else:
            d.deliver(t, client, publisher, seq)
    c = d.finish(events[-1][0]).as_dict()
    assert len(d.fifo_times) == c["fifo"]
    return {k: c[k] for k in ("deliveries", "duplicate", "fifo", "late", "phantom")}


@pytest.mark.parametrize("seed", range(40))
def test_online_counts_are_those_of_the_whole_history(seed: int) -> None:
    rng = random.Random(seed)
    pubs, deliveries = history(rng, in_order=True)
    retention = rng.choice([0.5, 1.0, 3.0])  # at least D (Deliveries keeps that much)
    got = judge(pubs, deliveries, retention)
    assert got == model(pubs, deliveries, retention)
    assert got["late"] > 0 or retention == 3.0
    assert got["deliveries"] == len(deliveries)


@pytest.mark.parametrize("seed", range(20))
def test_offline_counts_hold_for_any_numbering(seed: int) -> None:
    rng = random.Random(1000 + seed)
    pubs, deliveries = history(rng, in_order=False)
    assert judge(pubs, deliveries, math.inf) == model(pubs, deliveries, math.inf)


def test_a_first_delivery_behind_a_higher_numbered_one_breaks_fifo() -> None:
    d = Deliveries(activation=0.0, deactivation=1.0, crash_linger=1.0, retention=5.0)
    for seq in (1, 2, 3):
        d.publish(0.1 * seq, "p", "p", seq, {"class": 1})
    d.deliver(0.5, "c", "p", 2)
    d.deliver(0.6, "c", "p", 1)  # behind 2: R7
    d.deliver(0.7, "c", "p", 1)  # a duplicate, not judged again
    d.deliver(0.8, "c", "p", 3)
    d.deliver(0.9, "other", "p", 1)  # another client's order is its own
    counts = d.finish(10.0)
    assert (counts.fifo, counts.duplicate, counts.deliveries) == (1, 1, 5)
    assert list(d.fifo_times) == [0.6]
