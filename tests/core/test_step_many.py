"""`Broker.step_many`: a batch of events gives the effects of stepping them one by one, in the
same order, whatever the batch holds (publications, notifications from neighbours and from
strangers, gray ones, control messages, faults), for every kind of broker."""

from __future__ import annotations

import random

import pytest

from weeble.core.broker import Broker
from weeble.core.corruption import CorruptionError
from weeble.core.events import (
    ClientPublish,
    ClientSubscribe,
    ClientUnsubscribe,
    Corrupt,
    Effect,
    Event,
    Receive,
    Start,
)
from weeble.core.filters import Filter
from weeble.core.messages import Notification, Notify, Sub
from weeble.core.rom import Algorithm, Params, Rom

P = Params(pi=10.0, rho=5.0, delta_min=0.01, delta_max=0.1, d=4)
FILTERS = [Filter.equals("class", 1), Filter.equals("class", 2), Filter.parse("class >= 2"),
           Filter.parse("class == 1 && n < 5"), Filter.equals("n", 3)]
SOURCES = ["p", "x", "y", "stranger", "c1", "c2"]

KINDS = {
    "simple": {"algorithm": Algorithm.SIMPLE},
    "identity, hierarchical": {"algorithm": Algorithm.IDENTITY, "hierarchical": True},
    "identity, wrapper": {"algorithm": Algorithm.IDENTITY, "wrapper": True},
    "flooding": {"algorithm": Algorithm.FLOODING},
    "covering": {"algorithm": Algorithm.COVERING1},
}


def broker(kind: str) -> Broker:
    b = Broker(Rom(broker_id="b", neighbors=frozenset({"p", "x", "y"}), root="p", parent="p",
                   params=P, **KINDS[kind]))  # type: ignore[arg-type]
    b.step(0.0, Start())
    return b


def events(rng: random.Random, count: int) -> list[Event]:
    """A random batch; each call of it with an equal generator gives equal (not the same)
    objects, so two brokers never share a notification (its index keys travel on it)."""
    out: list[Event] = []
    for i in range(count):
        r = rng.random()
        attrs = {"class": rng.randrange(4), "n": rng.randrange(8)}
        if rng.random() < 0.2:
            attrs["s"] = rng.choice(["a", "b"])
        n = Notification(rng.choice(["pub1", "pub2"]), i, attrs, 1.0)
        source = rng.choice(SOURCES)
        if r < 0.4:
            out.append(ClientPublish(rng.choice(["c1", "c2"]), n))
        elif r < 0.8:
            out.append(Receive(source, Notify(n, gray=rng.random() < 0.1)))
        elif r < 0.88:
            out.append(ClientSubscribe(rng.choice(["c1", "c2"]), f"s{rng.randrange(4)}",
                                       rng.choice(FILTERS)))
        elif r < 0.92:
            out.append(ClientUnsubscribe(rng.choice(["c1", "c2"]), f"s{rng.randrange(4)}",
                                         rng.choice(FILTERS)))
        else:
            out.append(Receive(source, Sub(f"r{rng.randrange(4)}", rng.choice(FILTERS))))
    return out


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_batch_gives_the_effects_of_stepping_one_by_one(kind: str) -> None:
    one, many = broker(kind), broker(kind)
    for seed in range(60):
        now = 1.0 + seed * 0.01
        batch_one = events(random.Random(seed), 1 + seed % 17)
        batch_many = events(random.Random(seed), 1 + seed % 17)
        expected = [one.step(now, e) for e in batch_one]
        out: list[list[Effect]] = []
        assert many.step_many(now, batch_many, out) is out
        assert out == expected, seed
        # the notification object that arrived is the one passed on (the runtime forwards its
        # bytes by identity)
        for event, effects in zip(batch_many, out, strict=True):
            if type(event) is Receive and type(event.message) is Notify:
                for e in effects:
                    n = getattr(getattr(e, "message", e), "notification", None)
                    assert n is None or n is event.message.notification
    assert one.snapshot() == many.snapshot()


def test_an_event_that_raises_leaves_the_effects_of_those_before_it() -> None:
    one, many = broker("simple"), broker("simple")
    for b in (one, many):
        b.step(0.5, ClientSubscribe("c1", "s1", FILTERS[0]))
    n = [Notification("pub", i, {"class": 1}) for i in range(3)]
    out: list[list[Effect]] = []
    with pytest.raises(CorruptionError):
        many.step_many(1.0, [Receive("x", Notify(n[0])), ClientPublish("c2", n[1]),
                             Corrupt("no such target", 1), Receive("y", Notify(n[2]))], out)
    assert out == [one.step(1.0, Receive("x", Notify(n[0]))),
                   one.step(1.0, ClientPublish("c2", n[1]))]
    assert out[0] and out[1]  # delivered to c1 (and forwarded)
