"""The workload plan: a pure function of (scenario, seed) giving every client action, timed.

`workload_plan(scenario)` yields, in time order, what the clients of a run do: `Subscribe` (with
the subscription's planned end and how it ends) and `Publish` (with the publisher's sequence
number). The simulator (broker/sim/workload.py) and the live clients (orchestrator/workload.py)
both drive their clients from it, so a live run and its simulated replay have the same
subscription and publication history, up to timing. Refreshes are not in the plan: every
subscription is refreshed every ρ by its client (SC-4); the plan only gives the phase of the
first refresh.

The randomized workload is the thesis's "seed 000" setup (spec ch3 §4.1):
- subscriptions arrive as a Poisson process with global rate λ = N_s / mean_lifetime and live an
  exponential time with that mean, so N_s = λ/µ is the equilibrium count;
- warm start: N_s subscriptions at t = 0, each with a fresh exponential lifetime. The exponential
  is memoryless, so this *is* the equilibrium and no warm-up is needed. Warm-start subscriptions
  have been live for a while: their first refresh is uniformly random in (0, ρ], instead of all
  refreshing in lockstep at multiples of ρ; an arrival's first refresh is ρ after it. The
  simulator injects them at t = 0 at no cost; live, `live.warm_start_rate` has `weeble run`
  establish them before the run's origin instead (orchestrator/workload.py `warm_start`);
- filter `class == k` (mode skip_ring: topic `topic == "t<k>"`), k uniform in [0, z); subscriber
  at a uniformly random leaf (or any broker);
- publications: Poisson with global rate ω at a uniformly random leaf (or any broker, or the
  root), attributes {class: k}, k uniform. Publisher `p<broker>` numbers its notifications 1, 2, …;
- each workload subscription is its own client `c<n>`, subscription id `c<n>/0`. A fraction
  `subscribers_crash` of them end by crashing (refreshes stop, no unsubscription: F12).
Plus the scenario's explicit `subscriptions` (client `alice`'s k-th is `alice/<k>`) and
`publications` (publisher `client`, default `p<broker>`). With `routing.adverts`, the publishers'
advertisements (`advertisements(scenario)`), held for the whole run.

Subscriptions and publications draw from separate streams ("<seed>:subscriptions",
"<seed>:publications"), so changing ω leaves the subscription history unchanged. Everything is
generated lazily: a plan of 10^5 subscriptions and 10^6 publications costs memory only for what
the consumer holds.
"""

from __future__ import annotations

import heapq
import json
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass

from weeble.core.filters import Filter, Value
from weeble.core.rom import Mode
from weeble.model.scenario import Scenario

INF = math.inf


@dataclass(slots=True)
class Subscribe:
    """A client subscribes at `t` and keeps its subscription until `end`."""

    t: float
    client: str
    broker: str
    sub_id: str
    filter: Filter
    cls: int | None  # the workload's filter class; None for a scenario's explicit filter
    end: float  # planned end; inf: until the run ends
    crashes: bool  # at `end` it crashes (refreshes stop, no unsubscription: F12), else unsubscribes
    first_refresh: float  # when its first refresh is due (then every ρ)


@dataclass(slots=True)
class Publish:
    """Publisher `publisher`, a client of `broker`, publishes its `seq`-th notification at `t`."""

    t: float
    broker: str
    publisher: str
    seq: int
    attributes: dict[str, Value]  # shared between notifications of one class: read-only
    cls: int | None  # the workload's class; for an explicit publication its integer `class`


Action = Subscribe | Publish


def workload_plan(scenario: Scenario, *, seed: int | None = None,
                  until: float | None = None) -> Iterator[Action]:
    """Every client action of the run with t <= `until` (default: the scenario's duration), in
    time order (ties: workload subscriptions, explicit subscriptions, explicit publications,
    workload publications). `seed` defaults to the scenario's."""
    seed = scenario.seed if seed is None else seed
    until = scenario.duration if until is None else until
    seqs: dict[str, int] = {}  # per publisher, across the workload and explicit publications
    return _numbered(heapq.merge(
        _workload_subscriptions(scenario, seed, until),
        _explicit_subscriptions(scenario, until),
        _explicit_publications(scenario, until),
        _workload_publications(scenario, seed, until),
        key=_time), seqs)


def _time(action: Action) -> float:
    return action.t


def _numbered(actions: Iterator[Action], seqs: dict[str, int]) -> Iterator[Action]:
    """Sequence numbers per publisher, in publication order (merged over every source)."""
    for action in actions:
        if type(action) is Publish:
            action.seq = seqs[action.publisher] = seqs.get(action.publisher, 0) + 1
        yield action


@dataclass(slots=True)
class Advertise:
    """With advertisements (`routing.adverts`, thesis §3.4.2): publisher `publisher` at `broker`
    advertises `filter`, covering everything it will publish, from the start of the run and
    refreshed every ρ like a subscription (the plan does not list the refreshes)."""

    publisher: str
    broker: str
    adv_id: str
    filter: Filter


def advertisements(scenario: Scenario) -> list[Advertise]:
    """The advertisements of the plan's publishers (none without `routing.adverts`): a
    workload publisher advertises every filter class it draws from, an explicit publication's
    publisher the attributes it publishes."""
    if not scenario.routing.adverts:
        return []
    out: list[Advertise] = []
    w = scenario.workload
    if w is not None and w.publish_rate > 0:
        cover = Filter.parse(f"class range [0, {w.filter_classes - 1}]")
        out += [Advertise(f"p{b}", b, f"p{b}/adv0", cover) for b in _placements(scenario)[1]]
    seen = {(a.publisher, str(a.filter)) for a in out}
    count: dict[str, int] = {a.publisher: 1 for a in out}
    for pub in scenario.publications:
        client = pub.client or f"p{pub.broker}"
        f = Filter.parse(" && ".join(f"{k} == {_literal(v)}" for k, v in
                                     sorted(pub.attributes.items())) or "true")
        if (client, str(f)) not in seen:
            seen.add((client, str(f)))
            n = count[client] = count.get(client, 0) + 1
            out.append(Advertise(client, pub.broker, f"{client}/adv{n - 1}", f))
    return out


def _literal(v: Value) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    return repr(v)


def _placements(scenario: Scenario) -> tuple[list[str], list[str]]:
    """(subscriber brokers, publisher brokers) of the randomized workload."""
    topology = scenario.build_topology()
    everyone = list(topology.brokers)
    w = scenario.workload
    if w is None:
        return everyone, everyone
    leaves = topology.leaves(scenario.root_broker)
    subscribers = leaves if w.subscriber_placement == "leaves" else everyone
    publishers = {"leaves": leaves, "all": everyone,
                  "root": [scenario.root_broker]}[w.publisher_placement]
    return subscribers, publishers


def topic_name(cls: int) -> str:
    """The topic of filter class k in the topic-based skip_ring mode: subscriptions are
    `topic == "t<k>"` and publications carry {class: k, topic: "t<k>"}."""
    return f"t{cls}"


def _workload_subscriptions(scenario: Scenario, seed: int, until: float) -> Iterator[Subscribe]:
    w = scenario.workload
    if w is None or w.subscriptions == 0:
        return
    rng = random.Random(f"{seed}:subscriptions")
    brokers, _ = _placements(scenario)
    rho, z, lifetime = scenario.timing.rho, w.filter_classes, w.mean_lifetime
    rate = w.subscriptions / lifetime
    crash_fraction = w.subscribers_crash
    topics = scenario.mode is Mode.SKIP_RING
    filters: dict[int, Filter] = {}
    n = 0
    # rng.randrange(z), rng.randrange(len(brokers)), rng.expovariate(µ) and rng.uniform(0, ρ),
    # spelled out as random.Random computes them (the same draws, the same floats): this runs
    # 10^5 times at a warm start, where the library's Python-level calls cost a tenth of a run
    getrandbits, uniform01, log = rng.getrandbits, rng.random, math.log
    nb = len(brokers)
    kz, kb = _bits_below(z), _bits_below(nb)
    mu = 1.0 / lifetime

    def draw(t: float, warm: bool) -> Subscribe:
        # The order of the draws is part of the plan: it fixes the history for a seed.
        nonlocal n
        cls = getrandbits(kz)
        while cls >= z:
            cls = getrandbits(kz)
        f = filters.get(cls)
        if f is None:
            f = filters[cls] = (Filter.equals("topic", topic_name(cls)) if topics
                                else Filter.equals("class", cls))
        b = getrandbits(kb)
        while b >= nb:
            b = getrandbits(kb)
        broker = brokers[b]
        end = t + -log(1.0 - uniform01()) / mu
        crashes = crash_fraction > 0 and uniform01() < crash_fraction
        first = t + (0.0 + (rho - 0.0) * uniform01() if warm else rho)
        client = f"c{n}"
        n += 1
        return Subscribe(t=t, client=client, broker=broker, sub_id=f"{client}/0", filter=f,
                         cls=cls, end=end, crashes=crashes, first_refresh=first)

    for _ in range(w.subscriptions):
        yield draw(0.0, warm=True)
    t = rng.expovariate(rate)
    while t <= until:
        yield draw(t, warm=False)
        t += rng.expovariate(rate)


def _bits_below(n: int) -> int:
    """How many random bits `random.Random.randrange(n)` draws at a time (it draws again until
    the number is below n)."""
    if n <= 0:
        raise ValueError(f"empty range for randrange() ({n})")
    return n.bit_length()


def _workload_publications(scenario: Scenario, seed: int, until: float) -> Iterator[Publish]:
    w = scenario.workload
    if w is None or w.publish_rate <= 0:
        return
    rng = random.Random(f"{seed}:publications")
    _, brokers = _placements(scenario)
    publisher = {b: f"p{b}" for b in brokers}
    topics = scenario.mode is Mode.SKIP_RING
    attributes: dict[int, dict[str, Value]] = {}
    t = rng.expovariate(w.publish_rate)
    while t <= until:
        broker = brokers[rng.randrange(len(brokers))]
        cls = rng.randrange(w.filter_classes)
        attrs = attributes.get(cls)
        if attrs is None:
            attrs = attributes[cls] = ({"class": cls, "topic": topic_name(cls)} if topics
                                       else {"class": cls})
        yield Publish(t=t, broker=broker, publisher=publisher[broker], seq=0, attributes=attrs,
                      cls=cls)
        t += rng.expovariate(w.publish_rate)


def _explicit_subscriptions(scenario: Scenario, until: float) -> Iterator[Subscribe]:
    rho = scenario.timing.rho
    counts: dict[str, int] = {}
    planned = []
    for spec in scenario.subscriptions:
        k = counts.get(spec.client, 0)
        counts[spec.client] = k + 1
        if spec.start <= until:
            planned.append(Subscribe(
                t=spec.start, client=spec.client, broker=spec.broker,
                sub_id=spec.sub_id or f"{spec.client}/{k}", filter=Filter.parse(spec.filter),
                cls=None,
                end=INF if spec.end is None else spec.end, crashes=False,
                first_refresh=(spec.start + rho if spec.first_refresh is None
                               else spec.first_refresh)))
    planned.sort(key=_time)  # stable: a client's subscriptions keep their order at equal times
    yield from planned


def _explicit_publications(scenario: Scenario, until: float) -> Iterator[Publish]:
    planned = []
    for pub in scenario.publications:
        if pub.at <= until:
            cls = pub.attributes.get("class")
            planned.append(Publish(
                t=pub.at, broker=pub.broker, publisher=pub.client or f"p{pub.broker}", seq=0,
                attributes=dict(pub.attributes), cls=cls if type(cls) is int else None))
    planned.sort(key=_time)
    yield from planned
