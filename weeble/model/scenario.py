"""The scenario file: one YAML schema for simulated and live runs, validated with clear errors.

`load_scenario(path)` either returns a `Scenario` whose topology is a tree, whose timing satisfies
the algorithm's stabilization precondition, whose filters parse and whose faults and
subscriptions name existing brokers — or raises `ScenarioError` with the file, the field path
(`routing.algorithm`, `chaos.faults[2].target`) and the problem. Users never see a traceback.

A scenario's faults are a chaos experiment (`chaos:`, the YAML of a `weeble chaos` file, see
experiment.py): one fault vocabulary for simulated and live runs.

Example (every field that has a default may be left out):

    name: sim-small
    seed: 7
    duration: 300            # virtual seconds
    topology: {kind: kary, m: 3, levels: 3}
    routing: {algorithm: identity, hierarchical: true}
    mode: leasing            # or anti_entropy (seed 002; knobs in `anti_entropy:`), skip_ring
                             # (seed 003; knobs in `skip_ring:`, subscriptions `topic == "x"`)
    timing: {pi: 30.2, rho: 30, delta_min: 0.025, delta_max: 0.025, delay: constant}
    workload: {filter_classes: 20, subscriptions: 200, mean_lifetime: 120, publish_rate: 50}
    subscriptions:
      - {client: alice, broker: b4, filter: "class == 3", start: 5, end: 250}
    publications:
      - {at: 100, broker: b12, attributes: {class: 3}}
    trace: {sends: false, snapshots_every: null}
    check_every: 1.0
    live: {base_host: 127.0.0.2, listen_port: 7000, tls: false}   # live runs only
    chaos:                   # the faults: a chaos experiment (experiment.py), live and sim
      faults:
        - {kind: clock, target: b1, at: 100, value: 0}
        - {kind: drop, link: [b0, b1], probability: 0.5, at: 120, duration: 10}
        - {kind: client_crash, clients: {random: 2}, at: 150}
        - {kind: cut, link: [b0, b1], at: 160, duration: 5}
    overlay: {kind: static}  # or {kind: coloured, xi: 1.0, height: 4}: the 3-colour scheme (4.5)
    reconfigurations:        # managed reconfigurations (thesis ch. 4), simulator only for now
      ordering: fifo         # none | fifo | causal, kept across link exchanges (4.3.3)
      start: 60              # the operations without `at` run one after the other from here
      gap: 2                 # s between one operation's end and the next one's start
      operations:
        - {op: exchange, remove: [b1, b4], add: [b4, b2]}
        - {op: add_leaf, new: b13, attach: b5}
        - {op: remove_leaf, leaf: b13}
        - {op: exchange, remove: [b0, b3], add: [b3, b1], at: 200}   # at a given time
        - {op: insert_inner, new: b14, between: [b2, b7]}    # composites: in the sequence
        - {op: remove_inner, broker: b3, hub: b0}
        - {op: move_to, edges: [[b0, b1], ...]}    # static: D(T1, T2) exchanges; coloured: one
        - {op: random, count: 5, at: 250, every: 5, length: 4}   # random exchanges at a rate
    measure: {start: 130, table_samples: 4}   # a steady-state window to the end (simulator)
    optimizer:               # the tree optimizer (thesis ch. 5): simulator, and live
      heuristic: ci          # ci | mst | mit | none (the static tree)
      broadcast_interval: 2.5  # s; eta, cache_size, filter_size, hashes: Table 5.2
      start: 30              # the heuristic starts here
      link_costs: {model: plane, max: 10, links: [[b0, b1, 2.5]]}
      # live, round trips measured every `every` s, c = ms x per_ms (max until measured):
      # link_costs: {model: measured, every: 1, per_ms: 1, max: 10}
      processing_costs: {model: uniform, max: 10, brokers: {b0: 1}}
"""

from __future__ import annotations

import ipaddress
import math
import random
import re
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from weeble.core.events import network_id, valid_client
from weeble.core.filters import Filter, FilterSyntaxError
from weeble.core.reconfig.exchange import supported as exchange_supported
from weeble.core.reconfig.plan import (
    AddLeaf,
    ExchangeLink,
    Op,
    PlanError,
    RemoveLeaf,
    Tree,
    apply,
    edge,
    insert_inner,
    random_exchange,
    remove_inner,
)
from weeble.core.reconfig.plan import plan as plan_move
from weeble.core.rom import (
    Algorithm,
    AntiEntropy,
    Colours,
    ConfigError,
    Heuristic,
    Mode,
    Optimizer,
    Options,
    Ordering,
    OverlayKind,
    Params,
    Rom,
    SkipRing,
    leased_like,
    run_bound,
)
from weeble.model import topology as topo
from weeble.model.errors import problems
from weeble.model.experiment import Experiment, ExperimentError, tree_of_scenario
from weeble.model.faults import Attributes
from weeble.model.topology import Topology

_WORKLOAD_CLIENT = re.compile(r"c\d+")  # the workload's clients (model/workload.py)


class ScenarioError(ValueError):
    """A scenario the user must fix; the message says where and what."""


class _Model(BaseModel):
    # Unknown keys are almost always typos; silently ignoring them would run the wrong experiment.
    model_config = ConfigDict(extra="forbid", frozen=True)


# ---- topology -------------------------------------------------------------------------------


class KaryTopology(_Model):
    kind: Literal["kary"]
    m: int = Field(ge=1)
    levels: int = Field(ge=1)

    def build(self, seed: int) -> Topology:
        return topo.kary_tree(self.m, self.levels)


class RandomTopology(_Model):
    kind: Literal["random"]
    brokers: int = Field(ge=1)
    seed: int | None = None  # default: the scenario seed

    def build(self, seed: int) -> Topology:
        return topo.random_tree(self.brokers, self.seed if self.seed is not None else seed)


class EdgesTopology(_Model):
    kind: Literal["edges"]
    edges: list[tuple[str, str]] = Field(min_length=1)

    def build(self, seed: int) -> Topology:
        return topo.from_edges(self.edges)


class ChainTopology(_Model):
    kind: Literal["chain"]
    brokers: int = Field(ge=1)

    def build(self, seed: int) -> Topology:
        return topo.chain(self.brokers)


TopologySpec = Annotated[
    KaryTopology | RandomTopology | EdgesTopology | ChainTopology, Field(discriminator="kind")
]

# ---- routing and timing ---------------------------------------------------------------------


class Routing(_Model):
    algorithm: Algorithm
    hierarchical: bool = False
    wrapper: bool = False
    # The core's Options, one knob each (broker/core/rom.py says what they do).
    flag_rule: bool = True  # False reproduces the non-self-stabilizing original (claim 4)
    second_chance: bool = True  # False: an ablation, every overrun deletes every entry
    renew_forwarded: bool = True  # False: the thesis as printed (valid entries can expire)
    unsub_counts_all: bool = True
    adverts: bool = False  # advertisements (thesis §3.4.2) route the subscriptions


class Timing(_Model):
    pi: float  # π, s: the leasing (overrun) period of routing entries
    rho: float  # ρ, s: how often a client refreshes its subscriptions
    delta_min: float  # δmin, s: the least delay of a message on a link
    delta_max: float  # δmax, s: the largest delay of a message on a link (the bound Δ uses it)
    # constant: always delta_max. uniform: in [delta_min, delta_max]. adversarial: within the
    # bounds, chosen to widen the refresh gap of spec Fig. 3.1 (see sim/engine.py).
    delay: Literal["constant", "uniform", "adversarial"] = "constant"
    d: int | None = None  # default: the topology's diameter


# ---- clients --------------------------------------------------------------------------------


class Workload(_Model):
    """The randomized workload of spec ch3 §4.1 (see sim/workload.py)."""

    filter_classes: int = Field(ge=1)
    subscriptions: int = Field(ge=0)  # N_s, the equilibrium number of live subscriptions
    mean_lifetime: float = Field(gt=0)
    publish_rate: float = Field(ge=0)  # ω, notifications per second over the whole system
    subscriber_placement: Literal["leaves", "all"] = "leaves"
    publisher_placement: Literal["leaves", "all", "root"] = "leaves"
    # Fraction of subscribers that end by crashing (no unsubscription, refreshes stop) (F12).
    subscribers_crash: float = Field(default=0.0, ge=0, le=1)


class Subscription(_Model):
    client: str  # the client's id (no `/`: the brokers hold its sub ids as `<client>/<sub_id>`)
    broker: str  # the broker it is attached to
    filter: str  # e.g. 'class == 3 && price < 100' (the trace schema's Filters)
    start: float = Field(default=0.0, ge=0)  # s: when it subscribes
    end: float | None = None  # None: until the end of the run
    # when its first refresh is due (then every ρ); default start + ρ. A workload subscription
    # written out (`weeble shrink`) keeps its phase with it; live clients refresh every ρ.
    first_refresh: float | None = Field(default=None, ge=0)
    # the subscription's id, unique per client (default `<client>/<k>`, its k-th); another
    # client may use the same one, as the client library allows
    sub_id: str | None = Field(default=None, min_length=1)


class Publication(_Model):
    at: float = Field(ge=0)  # s: when it is published
    broker: str  # the publisher's broker
    attributes: Attributes  # name: value (str, int, float or bool; finite numbers only)
    client: str | None = None  # default: p<broker>, the workload's publisher at that broker


# ---- the overlay and its reconfigurations (thesis ch. 4) ------------------------------------


class Overlay(_Model):
    """Which overlay the brokers run: the static tree of chapter 3 (changed only by managed
    reconfigurations, 4.2 and 4.4) or the self-stabilizing 3-colour tree of 4.5 (seed 001),
    whose constants are the core's `Colours` (broker/core/rom.py says what each does)."""

    kind: OverlayKind = OverlayKind.STATIC
    xi: float | None = Field(default=None, gt=0)  # ξ, the root's recolor period; coloured only
    height: int | None = Field(default=None, ge=1)  # h ≥ the tree height; default: brokers − 1
    degree: int = Field(default=0, ge=0)
    timeout: Literal["paper", "thesis"] = "paper"  # which ξ′ (A13)
    xi_prime: float | None = Field(default=None, gt=0)
    colour_check: bool = True
    flag_on_insert: bool = True  # E1
    prune_all: bool = True  # E2
    join_pacing: bool = True  # E3
    early_control: bool = True  # E4
    control_colour: Literal["c_new", "c_cur"] = "c_new"


# Each operation expands, on the tree it meets, into the elementary operations the simulator's
# Reconfigurator carries out, as (at, op): at None for the ones that run in the sequence.
Step = tuple[float | None, Op | Tree]


class ExchangeOp(_Model):
    """Link exchange r → a (4.4): remove the tree link `remove`, add `add`."""

    op: Literal["exchange"]
    remove: tuple[str, str]
    add: tuple[str, str]
    at: float | None = Field(default=None, ge=0)

    def expand(self, tree: Tree, coloured: bool, rng: random.Random) -> list[Step]:
        return [(self.at, ExchangeLink(remove=edge(*self.remove), add=edge(*self.add)))]


class AddLeafOp(_Model):
    """A new broker `new` joins as a leaf of `attach` (4.2)."""

    op: Literal["add_leaf"]
    new: str
    attach: str
    at: float | None = Field(default=None, ge=0)

    def expand(self, tree: Tree, coloured: bool, rng: random.Random) -> list[Step]:
        return [(self.at, AddLeaf(self.new, self.attach))]


class RemoveLeafOp(_Model):
    """Leaf broker `leaf` leaves, its clients with it (4.2)."""

    op: Literal["remove_leaf"]
    leaf: str
    at: float | None = Field(default=None, ge=0)

    def expand(self, tree: Tree, coloured: bool, rng: random.Random) -> list[Step]:
        return [(self.at, RemoveLeaf(self.leaf))]


class InsertInnerOp(_Model):
    """Insert a new broker on the link `between` = [u, v]: it joins as a leaf of u, then u–v is
    exchanged for new–v (4.2; two operations, in the sequence)."""

    op: Literal["insert_inner"]
    new: str
    between: tuple[str, str]

    def expand(self, tree: Tree, coloured: bool, rng: random.Random) -> list[Step]:
        return [(None, o) for o in insert_inner(tree, self.new, self.between)]


class RemoveInnerOp(_Model):
    """Remove an inner broker: its other neighbours move to `hub` (default: its first
    neighbour), one exchange each, then it leaves as a leaf (4.2; in the sequence)."""

    op: Literal["remove_inner"]
    broker: str
    hub: str | None = None

    def expand(self, tree: Tree, coloured: bool, rng: random.Random) -> list[Step]:
        return [(None, o) for o in remove_inner(tree, self.broker, self.hub)]


class MoveToOp(_Model):
    """Turn the tree into `edges`: on the static overlay D(T1, T2) exchanges (and leaf adds
    and removals for brokers that come or go), in the sequence (Theorem 2); on the coloured
    overlay one request, all at once (4.5.3), which may have `at`."""

    op: Literal["move_to"]
    edges: list[tuple[str, str]] = Field(min_length=1)
    at: float | None = Field(default=None, ge=0)

    def expand(self, tree: Tree, coloured: bool, rng: random.Random) -> list[Step]:
        target = Tree.of(self.edges)
        if coloured:
            return [(self.at, target)]
        if self.at is not None:
            raise PlanError("at: a move of the static overlay is a sequence of operations:"
                            " leave out `at` (or use overlay.kind: coloured)")
        return [(None, o) for o in plan_move(tree, target)]


class RandomOp(_Model):
    """`count` random link exchanges (drawn from the scenario's seed on the tree each one
    meets; `length`: cycles of that many brokers): in the sequence, or from `at` on, one every
    `every` s."""

    op: Literal["random"]
    count: int = Field(ge=1)
    length: int | None = Field(default=None, ge=3)
    at: float | None = Field(default=None, ge=0)
    every: float | None = Field(default=None, gt=0)

    def expand(self, tree: Tree, coloured: bool, rng: random.Random) -> list[Step]:
        if (self.at is None) != (self.every is None):
            raise PlanError("every: give `at` and `every` together (or neither: in the"
                            " sequence)")
        out: list[Step] = []
        for i in range(self.count):
            op = random_exchange(tree, rng, self.length)
            tree = apply(tree, op)
            out.append((None if self.at is None else self.at + i * (self.every or 0.0), op))
        return out


Operation = Annotated[ExchangeOp | AddLeafOp | RemoveLeafOp | InsertInnerOp | RemoveInnerOp
                      | MoveToOp | RandomOp, Field(discriminator="op")]


class Reconfigurations(_Model):
    """Managed reconfigurations (thesis ch. 4) and the knobs of the coordinated link exchange.

    Operations without `at` run one after the other from `start` (each begins `gap` s after the
    previous one ended); an operation with `at` starts then, whatever else runs (overlapping
    exchanges meet each other's locks). The simulator carries them out (`weeble simulate`)."""

    operations: list[Operation] = []
    start: float = Field(default=0.0, ge=0)
    gap: float = Field(default=0.0, ge=0)
    # The strawman of 4.4.1 (unsubscribe at r, resubscribe at a, no coordination): a baseline.
    strawman: bool = False
    ordering: Ordering = Ordering.FIFO  # kept across link exchanges (4.3.3, 4.4.2, 4.5.4)
    # The coordinated link exchange's Options (broker/core/rom.py): switching off a queue or
    # the relay hold is an ablation; backoff bounds the random wait before a lock retry (D10).
    qsub: bool = True
    qnot: bool = True
    hold_relays: bool = True
    backoff: float | None = Field(default=None, gt=0)


# ---- the tree optimizer (thesis ch. 5) ------------------------------------------------------


class LinkCosts(_Model):
    """The cost c of a link between any two brokers (the physical network's, thesis 5.6.2:
    scaled to [0, max]). `plane`: brokers at random points of a square, c proportional to their
    distance (a Waxman-like stand-in for the thesis's Brite networks, which are not here);
    `uniform`: c ~ U[0, max] per pair. `links` sets pairs explicitly: [[b0, b1, 3.5], ...].
    `measured` (live runs): every broker measures the round trip to every other broker every
    `every` s (a Ping/Pong over the link stream where there is one, through the link's
    shaper; a gRPC health check of the peer's address where there is none) and c = round-trip
    ms, rounded up to a multiple of `resolution` ms (so that jitter does not make equal links
    look different and the optimizer trade them back and forth), × `per_ms`; until a pair is
    measured, and in the simulator, which measures nothing, c = `max` (or the pair's `links`
    entry)."""

    model: Literal["plane", "uniform", "measured"] = "plane"
    max: float = Field(default=10.0, ge=0)
    links: list[tuple[str, str, float]] = []
    every: float = Field(default=1.0, gt=0)  # measured: s between two round-trip probes
    per_ms: float = Field(default=1.0, gt=0)  # measured: cost per ms of round trip
    resolution: float = Field(default=5.0, gt=0)  # measured: ms a round trip is rounded up to


class ProcessingCosts(_Model):
    """The processing cost p of each broker: U[0, max] (thesis 5.6.2), or `brokers` explicitly."""

    model: Literal["uniform", "constant"] = "uniform"
    max: float = Field(default=10.0, ge=0)
    brokers: dict[str, float] = {}


class OptimizerSpec(_Model):
    """Who reshapes the tree while it runs (thesis ch. 5): the Cost-and-Interest heuristic (ci),
    the baselines l-MST (mst) and l-MIT (mit), or nobody (none: the static tree, the thesis's
    reference). Defaults are Table 5.2, with a tick of 10 ms (broadcast every 250 ticks)."""

    heuristic: Literal["ci", "mst", "mit", "none"] = "ci"
    broadcast_interval: float = Field(default=2.5, gt=0)
    update_interval: float | None = Field(default=None, gt=0)  # default: Table 5.2's ratio
    eta: int = Field(default=3, ge=2)
    cache_size: int = Field(default=4608, ge=1)
    filter_size: int | None = Field(default=None, ge=8)  # default 12 · cache_size
    hashes: int = Field(default=7, ge=1)
    start: float = Field(default=0.0, ge=0)  # the heuristic starts here (the static baseline
    cost_every: float = Field(default=10.0, gt=0)  # s between two `tree_cost` records
    link_costs: LinkCosts = LinkCosts()
    processing_costs: ProcessingCosts = ProcessingCosts()

    def costs(self, brokers: list[str], seed: int) -> tuple[dict[str, float],
                                                            dict[tuple[str, str], float]]:
        """(p per broker, c per broker pair (a < b)), drawn from the scenario's seed."""
        rng = random.Random(f"{seed}:costs")
        pc = self.processing_costs
        p = {b: (pc.max if pc.model == "constant" else rng.uniform(0, pc.max)) for b in brokers}
        for b, v in pc.brokers.items():
            p[b] = v
        lc = self.link_costs
        c: dict[tuple[str, str], float] = {}
        if lc.model == "measured":  # the placeholder until a round trip is measured
            c = {edge(a, b): lc.max for i, a in enumerate(brokers) for b in brokers[i + 1:]}
        elif lc.model == "plane":
            at = {b: (rng.random(), rng.random()) for b in brokers}
            dist = {(a, b): ((at[a][0] - at[b][0]) ** 2 + (at[a][1] - at[b][1]) ** 2) ** 0.5
                    for i, a in enumerate(brokers) for b in brokers[i + 1:]}
            top = max(dist.values(), default=1.0) or 1.0
            c = {edge(a, b): lc.max * d / top for (a, b), d in dist.items()}
        else:
            c = {edge(a, b): rng.uniform(0, lc.max)
                 for i, a in enumerate(brokers) for b in brokers[i + 1:]}
        for a, b, v in lc.links:
            c[edge(a, b)] = v
        return p, c

    def rom(self, broker: str, p: dict[str, float], c: dict[tuple[str, str], float],
            seed: int) -> Optimizer | None:
        if self.heuristic == "none":
            return None
        cache = self.cache_size
        return Optimizer(
            heuristic=Heuristic(self.heuristic), broadcast_interval=self.broadcast_interval,
            update_interval=(self.update_interval if self.update_interval is not None
                             else self.broadcast_interval * 281 / 250),
            eta=self.eta, cache_size=cache,
            filter_size=self.filter_size if self.filter_size is not None else 12 * cache,
            hashes=self.hashes, start=self.start, processing_cost=p[broker],
            link_costs=tuple(sorted((b, c[edge(broker, b)]) for b in p if b != broker)),
            seed=seed,
            measure_every=self.link_costs.every if self.link_costs.model == "measured" else 0.0,
            cost_per_ms=self.link_costs.per_ms, resolution_ms=self.link_costs.resolution)


# ---- the stabilization mode (issue 14) ------------------------------------------------------


class AntiEntropySpec(_Model):
    """The anti-entropy mode's knobs (seed 002; the core's `AntiEntropy` says what each does).
    Defaults are spec seed23 §D.4: m/n = 10, k = 7, re-salted every round, an exact round every
    16."""

    sketch: Literal["bloom", "full"] = "bloom"
    bits_per_element: float = Field(default=10.0, gt=0)  # m/n
    hashes: int = Field(default=7, ge=1)  # k
    min_bits: int = Field(default=64, ge=8)
    full_every: int = Field(default=16, ge=0)  # K; 0: never
    on_mismatch: Literal["localise", "full"] = "localise"
    timer: Literal["static", "strawman", "adaptive"] = "static"
    period: float = Field(default=3.0, gt=0)  # s, per directed edge
    threshold: int = Field(default=5, ge=1)  # adaptive: unwanted events before rounds resume
    reply_timeout: float = Field(default=2.0, gt=0)  # periods

    def rom(self) -> AntiEntropy:
        return AntiEntropy(**self.model_dump())


class SkipRingSpec(_Model):
    """The skip_ring mode's knobs (seed 003; the core's `SkipRing` says what each does).
    Defaults are spec seed23 §D.4: p(k) = 4^-k, q = 1/2, the supervisor's Timeout 4x the
    members'."""

    supervisors: list[str] | None = None  # default: the root broker
    interval: float = Field(default=1.0, gt=0)  # s: a member's Timeout
    supervisor_interval: float = Field(default=0.25, gt=0)  # s: the supervisor's Timeout
    p_base: float = Field(default=4.0, ge=1)
    q: float = Field(default=0.5, ge=0, le=1)
    flood: bool = True
    push_hints: bool = True
    plausibility: bool = True
    suspect_after: int = Field(default=3, ge=0)
    history: bool = False  # clients also get the topic's history (re-sent after a restart)

    def rom(self, root: str, seed: int) -> SkipRing:
        fields = self.model_dump()
        fields["supervisors"] = tuple(self.supervisors or (root,))
        return SkipRing(**fields, seed=seed)


# ---- the scenario ---------------------------------------------------------------------------


class Trace(_Model):
    enabled: bool = True  # False: summary.json only (the large runs, where traces reach GBs)
    sends: bool = False  # also trace every inter-broker send and receive
    snapshots_every: float | None = Field(default=None, gt=0)


class Measure(_Model):
    """A steady-state measurement window [start, duration] (`summary.json`'s `steady`): the
    inter-broker messages by kind and the publications inside it, per second, and the routing
    tables sampled `table_samples` times in it. A run with a warm start (the workload's
    N_s subscriptions at t = 0) needs a warm-up: the leases reach their steady rhythm after the
    first overruns, about 2π (the message complexity of thesis §3.3.3 is an equilibrium rate)."""

    start: float = Field(ge=0)  # s: the end of the warm-up
    table_samples: int = Field(default=4, ge=0)  # evenly spread over the window


class LiveLinks(_Model):
    """Initial user-space shaping of every broker-to-broker link (both directions)."""

    delay_ms: float = Field(default=0.0, ge=0)
    jitter_ms: float = Field(default=0.0, ge=0)
    loss: float = Field(default=0.0, ge=0, le=1)
    duplicate: float = Field(default=0.0, ge=0, le=1)


class Live(_Model):
    """Live runs only (`weeble up`, `weeble run`); the simulator ignores this block.

    Broker i (in topology order) gets its own loopback address `base_host + i`, and on it the
    three ports below, so every broker of a run has the same, predictable port numbers.
    """

    base_host: str = "127.0.0.2"
    listen_port: int = Field(default=7000, ge=0, le=65535)  # links + clients; 0: any free port
    admin_port: int = Field(default=7001, ge=0, le=65535)  # management (admin, health)
    metrics_port: int | None = Field(default=9100, ge=0, le=65535)  # None: no /metrics
    # TLS with per-run certificates on every port: admin (client certificate required), links
    # (each broker's certificate names it, and peers check it) and clients (the run's client
    # certificate, beside each client's token)
    tls: bool = False
    # Clients prove their id with a per-run token (the orchestrator hands them out). True: no
    # client authentication, any client may claim any id: local play only (`weeble` says so).
    open_clients: bool = False
    # Link messages already waiting when a link can write leave together as one Batch, up to
    # this many (bounded in bytes too; nothing is held back to fill one). 1: never batch.
    link_batch: int = Field(default=64, ge=1)
    links: LiveLinks = LiveLinks()
    # The workload is bounded in count as well as in time (DESIGN.md, "Network emulation").
    max_subscriptions: int = Field(default=1000, ge=0)
    max_publications: int = Field(default=100_000, ge=0)
    # The workload's warm start (its N_s subscriptions at t = 0) established before the run's
    # origin, at most this many subscriptions per second, each acknowledged by its broker and
    # then given d·δmax to reach every broker: the run starts with them in place, as the
    # papers' does, instead of sending them all at once at t = 0 (`weeble run`). None: at t = 0.
    warm_start_rate: float | None = Field(default=None, gt=0)
    startup_timeout: float = Field(default=30.0, gt=0)
    drain: float = Field(default=1.0, ge=0)  # seconds a stopping broker drains its link queues


class Scenario(_Model):
    name: str  # names the run (run ids, reports, the run header)
    seed: int = 0  # the run's random draws (workload, a random tree, faults) come from it
    duration: float = Field(gt=0)  # s of workload: virtual time simulated, real time live
    topology: TopologySpec  # the broker tree; `kind` picks one of the four forms
    root: str | None = None  # default: the first broker
    routing: Routing  # the routing algorithm and its switches
    timing: Timing  # π, ρ and the delay bounds the algorithms and the checker rely on
    workload: Workload | None = None  # a randomized workload drawn from the seed
    subscriptions: list[Subscription] = []  # explicit clients, beside or instead of the workload
    publications: list[Publication] = []  # explicit publications
    trace: Trace = Trace()  # what the run traces
    # where a live run puts its brokers (weeble/orchestrator/backend.py BACKEND_KINDS)
    backend: Literal["local", "mininet", "docker", "k8s"] = "local"
    live: Live = Live()
    check_every: float | None = Field(default=1.0, gt=0)  # None: no legitimacy checks
    # The faults: a chaos experiment run alongside the workload (t = 0 at the workload's
    # start), applied by `weeble run` live and by `weeble simulate` in virtual time.
    chaos: Experiment | None = None
    overlay: Overlay = Overlay()
    reconfigurations: Reconfigurations = Reconfigurations()
    measure: Measure | None = None  # a steady-state window (simulator only)
    optimizer: OptimizerSpec | None = None  # the tree optimizer (ch. 5); live: local backend
    # How routing tables are kept correct: leasing (seed 000, the default), anti_entropy
    # (seed 002: Bloom sketches per tree edge, its knobs in `anti_entropy:`), skip_ring (seed 003)
    mode: Mode = Mode.LEASING
    anti_entropy: AntiEntropySpec | None = None
    skip_ring: SkipRingSpec | None = None  # mode skip_ring: the topic overlay's knobs

    _built: tuple[object, Topology] | None = PrivateAttr(default=None)

    def build_topology(self) -> Topology:
        """The validated broker tree (built once, and again if a model_copy changed its inputs)."""
        key = (self.topology, self.seed)
        if self._built is None or self._built[0] != key:
            t = self.topology.build(self.seed)
            t.validate_tree()
            self._built = (key, t)
        return self._built[1]

    @property
    def root_broker(self) -> str:
        return self.root if self.root is not None else self.build_topology().brokers[0]

    @property
    def params(self) -> Params:
        t = self.timing
        d = t.d if t.d is not None else self.build_topology().diameter()
        return Params(pi=t.pi, rho=t.rho, delta_min=t.delta_min, delta_max=t.delta_max, d=d)

    @property
    def options(self) -> Options:
        r, x = self.routing, self.reconfigurations
        return Options(flag_rule=r.flag_rule, second_chance=r.second_chance,
                       renew_forwarded=r.renew_forwarded,
                       unsub_counts_all=r.unsub_counts_all, qsub=x.qsub, qnot=x.qnot,
                       hold_relays=x.hold_relays, backoff=x.backoff)

    @property
    def colours(self) -> Colours | None:
        """The 3-colour scheme's constants; None for the static overlay."""
        o = self.overlay
        if o.kind is OverlayKind.STATIC:
            return None
        assert o.xi is not None  # checked by _check
        height = o.height if o.height is not None else max(1, len(self.build_topology().brokers)
                                                            - 1)
        return Colours(xi=o.xi, height=height, degree=o.degree, timeout=o.timeout,
                       xi_prime=o.xi_prime, colour_check=o.colour_check,
                       flag_on_insert=o.flag_on_insert, prune_all=o.prune_all,
                       join_pacing=o.join_pacing, early_control=o.early_control,
                       control_colour=o.control_colour)

    def roms(self) -> dict[str, Rom]:
        """The ROM of every broker, in topology order: what the simulator's brokers get and
        what a live broker's configuration carries (one place from scenario knobs to the core)."""
        topology = self.build_topology()
        root, r, params, options = self.root_broker, self.routing, self.params, self.options
        parents = topology.parent_map(root)
        colours = self.colours
        overlay = {} if colours is None else {"overlay": OverlayKind.COLOURED,
                                              "colours": colours}
        o = self.optimizer
        p, c = o.costs(topology.brokers, self.seed) if o is not None else ({}, {})
        return {b: Rom(broker_id=b, neighbors=frozenset(topology.neighbors(b)), root=root,
                       parent=parents[b], algorithm=r.algorithm, params=params,
                       hierarchical=r.hierarchical, wrapper=r.wrapper, options=options,
                       adverts=r.adverts, ordering=self.reconfigurations.ordering,
                       optimizer=o.rom(b, p, c, self.seed) if o is not None else None,
                       mode=self.mode, anti_entropy=self.anti_entropy_rom,
                       skip_ring=(self.skip_ring_rom if self.mode is Mode.SKIP_RING
                                  else SkipRing()), **overlay)
                for b in topology.brokers}

    @property
    def skip_ring_rom(self) -> SkipRing:
        return (self.skip_ring or SkipRingSpec()).rom(self.root_broker, self.seed)

    @property
    def anti_entropy_rom(self) -> AntiEntropy:
        return (self.anti_entropy or AntiEntropySpec()).rom()

    @property
    def bound(self) -> float:
        """Δ, the worst-case stabilization time of the configured algorithm (the coloured
        overlay: ∆r of Eq. 4.3, the overlay's own bound, when it is the longer one)."""
        if self.mode is Mode.SKIP_RING:  # the skip ring's own (core SkipRing.bound)
            return self.skip_ring_rom.bound(self.params, len(self.build_topology().brokers))
        if self.mode is Mode.ANTI_ENTROPY:
            routing = self.anti_entropy_rom.bound(self.params)
        else:
            routing = self.params.bound(self.routing.algorithm, self.routing.wrapper,
                                        self.routing.adverts)
        colours = self.colours
        return run_bound(routing, None if colours is None else colours.bound(self.params))

    def reconfiguration_plan(self) -> list[Step]:
        """The operations as the simulator's Reconfigurator takes them: elementary (at, op),
        at None for the ones that run one after the other from `reconfigurations.start`."""
        return _plan(self)

    @property
    def last_fault_end(self) -> float:
        """When the last fault ends; 0 without faults (the empty start state is legitimate)."""
        if self.chaos is None:
            return 0.0
        return max((inj.end if inj.end is not None else inj.start
                    for inj in self.chaos.timeline(until=self.duration)), default=0.0)

    @property
    def longest_fault_delay(self) -> float:
        """The longest a fault holds a message on a link (s): a delay fault's delay plus its
        jitter, a pause's duration; 0 without such faults."""
        if self.chaos is None:
            return 0.0
        return max([(f.delay_ms + f.jitter_ms) / 1000 if f.kind == "delay" else
                    f.duration or 0.0 for f in self.chaos.faults
                    if f.kind in ("delay", "pause")], default=0.0)


# ---- loading --------------------------------------------------------------------------------


def load_scenario(path: str | Path) -> Scenario:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such file") from None
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(f"{where}: YAML syntax error: {problem}") from None
    return parse_scenario(data, source=str(path))


def parse_scenario(data: object, source: str = "<scenario>") -> Scenario:
    """Validate an already-parsed YAML document."""
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: expected a mapping of scenario fields at the top level")
    if "faults" in data:
        raise ScenarioError(f"{source}: faults: scenario faults are a chaos experiment now: write"
                            " them as `chaos: {faults: [...]}` (the YAML of a `weeble chaos`"
                            " file; weeble/model/faults.py lists the kinds)")
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        lines = [f"{path}: {problem}" for path, problem in problems(exc, Scenario)]
        if len(lines) > 10:
            lines = [*lines[:10], f"... and {len(lines) - 10} more"]
        raise ScenarioError(f"{source}: " + "\n  ".join(lines)) from None
    try:
        _check(scenario)
    except _Invalid as exc:
        raise ScenarioError(f"{source}: {exc.path}: {exc.problem}") from None
    return scenario


def with_mode(scenario: Scenario, mode: str) -> Scenario:
    """`scenario` in another mode (`--mode`), checked as if its file said so; the knobs of the
    mode it leaves are left out (the same scenario under leasing and under anti-entropy)."""
    try:
        new = Mode(mode)
        s = scenario.model_copy(update={"mode": new} | (
            {} if new is Mode.ANTI_ENTROPY else {"anti_entropy": None}))
    except ValueError:
        raise ScenarioError(f"--mode: unknown mode {mode!r} (modes: "
                            f"{', '.join(m.value for m in Mode)})") from None
    try:
        _check(s)
    except _Invalid as exc:
        raise ScenarioError(f"{scenario.name} with --mode {mode}: {exc.path}: {exc.problem}") \
            from None
    return s


# What an emulated link delay leaves below δmax for the brokers' own work on a hop (decoding,
# routing, the trace): a hop live is the shaped delay plus that processing, and a shaped δmax
# put every hop above δmax (26.3 ms median against 25 ms on 13 brokers, scenarios/paper.yaml)
# and long paths past their bound. At most a fifth of δmax, so a short δmax keeps most of it.
PROCESSING_HEADROOM_S = 0.005


def emulated_delay_ms(*, delta_min: float, delta_max: float) -> tuple[float, float]:
    """The shaped range [low, high] in ms that emulates link delays in [δmin, δmax] live: the
    range shifted down by the processing headroom, so that a hop, shaped delay plus the
    brokers' work, lands in [δmin, δmax]."""
    headroom = min(PROCESSING_HEADROOM_S, delta_max / 5)
    low = max(0.0, delta_min - headroom)
    high = max(low, delta_max - headroom)
    return round(low * 1000, 6), round(high * 1000, 6)


def with_link_delays(scenario: Scenario) -> Scenario:
    """`scenario` with its timing model's link delays emulated live: every broker-to-broker
    link's shaper (`live.links`) delays each message by δmax (`delay: constant`), or uniformly
    in [δmin, δmax] (`uniform`, and `adversarial`, whose choices need the simulator's view of
    every link), δmax less the brokers' processing headroom (`emulated_delay_ms`). Loopback is
    far faster than δmin; a failure whose order of events depends on the delays the simulator
    gave (a notification overtaking another on a longer path) needs them live too. A scenario
    that shapes its live links itself keeps its own shaping."""
    links = scenario.live.links
    if links.delay_ms or links.jitter_ms:
        return scenario
    p = scenario.timing
    low, high = emulated_delay_ms(delta_min=p.delta_min, delta_max=p.delta_max)
    if p.delay == "constant":
        delay, jitter = high, 0.0
    else:  # the shaper draws delay + U(-jitter, +jitter): U[δmin, δmax]
        delay, jitter = (low + high) / 2, (high - low) / 2
    shaped = links.model_copy(update={"delay_ms": delay, "jitter_ms": jitter})
    return scenario.model_copy(update={
        "live": scenario.live.model_copy(update={"links": shaped})})


def with_chaos(scenario: Scenario, experiment_path: str | Path) -> Scenario:
    """`scenario` with the chaos experiment of a file (the one `weeble chaos` takes) as its
    faults instead of its own, checked against its tree and duration."""
    from weeble.model.experiment import load_experiment

    try:
        s = scenario.model_copy(update={"chaos": load_experiment(experiment_path)})
        _check(s)
    except ExperimentError as exc:
        raise ScenarioError(str(exc)) from None
    except _Invalid as exc:
        raise ScenarioError(f"{experiment_path}: {exc.path.removeprefix('chaos.')}:"
                            f" {exc.problem}") from None
    return s


class _Invalid(Exception):
    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path, self.problem = path, problem


def _check(s: Scenario) -> None:
    """The checks that need more than one field: tree shape, timing, filters, names."""
    try:
        t = s.build_topology()
    except ConfigError as exc:
        raise _Invalid("topology", str(exc)) from None
    brokers = set(t.brokers)

    def known(path: str, broker: str) -> None:
        if broker not in brokers:
            raise _Invalid(path, f"unknown broker {broker!r} (brokers: {_listing(t.brokers)})")

    if s.root is not None:
        known("root", s.root)
    _check_live(s.live, len(t.brokers))
    try:
        s.params.validate(leased_like(s.routing.algorithm, s.mode), s.routing.wrapper)
    except ConfigError as exc:
        # Params names the field first ("pi: needs ..."): put it under `timing.`
        field, _, problem = str(exc).partition(": ")
        raise _Invalid(f"timing.{field}", problem) from None

    for i, sub in enumerate(s.subscriptions):
        known(f"subscriptions[{i}].broker", sub.broker)
        if sub.client in brokers:  # a broker would take it for a neighbour's message
            raise _Invalid(f"subscriptions[{i}].client", f"{sub.client!r} is a broker id")
        why = valid_client(sub.client)
        if why:
            raise _Invalid(f"subscriptions[{i}].client", why)
        if _WORKLOAD_CLIENT.fullmatch(sub.client) or sub.client in {f"p{b}" for b in brokers}:
            raise _Invalid(f"subscriptions[{i}].client",
                           f"{sub.client!r} is reserved for workload clients (c<n>, p<broker>)")
        try:
            Filter.parse(sub.filter)
        except FilterSyntaxError as exc:
            raise _Invalid(f"subscriptions[{i}].filter", f"{sub.filter!r}: {exc}") from None
        if sub.end is not None and sub.end <= sub.start:
            raise _Invalid(f"subscriptions[{i}].end", f"{sub.end} is not after start {sub.start}")
        if sub.first_refresh is not None and not \
                sub.start <= sub.first_refresh <= sub.start + s.timing.rho:
            raise _Invalid(f"subscriptions[{i}].first_refresh", f"{sub.first_refresh} is not in"
                           f" [start, start + rho] = [{sub.start}, {sub.start + s.timing.rho}]")
    _check_sub_ids(s)
    for i, pub in enumerate(s.publications):
        known(f"publications[{i}].broker", pub.broker)
        if pub.client in brokers:
            raise _Invalid(f"publications[{i}].client", f"{pub.client!r} is a broker id")

    _check_reconfigurations(s)
    _check_mode(s)
    if s.measure is not None and s.measure.start >= s.duration:
        raise _Invalid("measure.start", f"{s.measure.start} leaves no window before the end of"
                       f" the run (duration {s.duration})")

    if s.chaos is not None:
        steps = _plan(s)
        tree = tree_of_scenario(s)
        joining = frozenset(b for _, op in steps for b in (
            (op.new,) if isinstance(op, AddLeaf) else
            op.nodes if isinstance(op, Tree) else ()) if b not in tree.brokers)
        try:
            s.chaos.check(tree, s.params, until=s.duration, reconfigurations=len(steps),
                          joining=joining, colours=s.colours is not None)
        except ExperimentError as exc:
            raise _Invalid(f"chaos.{exc.path}", exc.problem) from None

    clients = {sub.client for sub in s.subscriptions}
    for i, fault in enumerate(s.chaos.faults if s.chaos is not None else []):
        for client in getattr(getattr(fault, "clients", None), "ids", ()):
            if client not in clients and not _WORKLOAD_CLIENT.fullmatch(client):
                raise _Invalid(f"chaos.faults[{i}].clients",
                               f"unknown client {client!r}: name a client of `subscriptions`,"
                               " a workload client c<n>, or use {random: k}")


def _check_sub_ids(s: Scenario) -> None:
    """A sub_id is unique per client (R1): one client's subscriptions with the same id must not
    overlap in time, or the second would be a refresh of the first. Ids are compared as the
    brokers hold them (`network_id`): a client's `s0` and `<client>/s0` are one."""
    held: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
    counts: dict[str, int] = {}
    for i, sub in enumerate(s.subscriptions):
        k = counts[sub.client] = counts.get(sub.client, -1) + 1
        sub_id = sub.sub_id or f"{sub.client}/{k}"  # as the workload names it
        end = math.inf if sub.end is None else sub.end
        key = (sub.client, network_id(sub.client, sub_id))
        for start, until, j in held.get(key, []):
            if sub.start < until and start < end:
                raise _Invalid(f"subscriptions[{i}].sub_id",
                               f"{sub_id!r} of client {sub.client!r} is in use by"
                               f" subscriptions[{j}] then")
        held.setdefault(key, []).append((sub.start, end, i))


def _check_reconfigurations(s: Scenario) -> None:
    """The overlay's constants, and every operation valid on the tree it will meet (the
    sequential ones in order; one with `at` on the tree the previous ones leave)."""
    o, x = s.overlay, s.reconfigurations
    coloured = o.kind is OverlayKind.COLOURED
    if coloured:
        if o.xi is None:
            raise _Invalid("overlay.xi", "the coloured overlay needs its recolor period ξ")
        colours = s.colours
        assert colours is not None
        try:
            colours.validate(s.params)
        except ConfigError as exc:
            field, _, problem = str(exc).partition(": ")
            raise _Invalid(f"overlay.{field.removeprefix('colours.')}", problem) from None
        if x.strawman:
            raise _Invalid("reconfigurations.strawman",
                           "the strawman is a link exchange of the static overlay (4.4.1)")
    else:
        for name in ("xi", "height", "xi_prime"):
            if getattr(o, name) is not None:
                raise _Invalid(f"overlay.{name}", "only the coloured overlay has it"
                               " (overlay.kind: coloured)")
    _plan(s)
    _check_optimizer(s)


# the modes `weeble simulate` and `weeble run` carry out
BUILT_MODES = (Mode.LEASING, Mode.ANTI_ENTROPY, Mode.SKIP_RING)


def _check_mode(s: Scenario) -> None:
    """A mode's preconditions: seed 002's anti-entropy keeps the tables of identity-based (or
    simple) routing on one static tree (its Definitions 2-4 and Theorem 1 are stated for them)."""
    if s.mode not in BUILT_MODES:
        raise _Invalid("mode", f"{s.mode.value!r} is not built yet (modes that run: "
                       f"{', '.join(m.value for m in BUILT_MODES)})")
    if s.anti_entropy is not None and s.mode is not Mode.ANTI_ENTROPY:
        raise _Invalid("anti_entropy", f"only the anti_entropy mode has it (mode: "
                       f"{s.mode.value}; set mode: anti_entropy)")
    _check_skip_ring(s)
    if s.mode is not Mode.ANTI_ENTROPY:
        for i, fault in enumerate(s.chaos.faults if s.chaos is not None else []):
            if str(getattr(fault, "field", "")).startswith("sketch."):
                raise _Invalid(f"chaos.faults[{i}].field", f"{fault.field}: only brokers of "
                               "the anti_entropy mode keep sketches (mode: anti_entropy)")
        return
    r = s.routing
    if (r.algorithm not in (Algorithm.IDENTITY, Algorithm.SIMPLE) or r.wrapper or r.adverts
            or r.hierarchical):
        raise _Invalid("routing", "the anti_entropy mode keeps seed 002's tables: peer-to-peer "
                       "routing that forwards a subscription unless it is a duplicate "
                       "(algorithm: identity, the paper's; or simple, every subscription by id;"
                       " no wrapper, adverts or hierarchical)")
    if s.overlay.kind is not OverlayKind.STATIC:
        raise _Invalid("overlay.kind", "the anti_entropy mode runs on the static tree")
    if s.reconfigurations.operations:
        raise _Invalid("reconfigurations", "the anti_entropy mode does not reshape its tree yet")
    if s.optimizer is not None and s.optimizer.heuristic != "none":
        raise _Invalid("optimizer", "the anti_entropy mode does not reshape its tree yet")


def _check_skip_ring(s: Scenario) -> None:
    """The skip_ring mode is topic-based (seed 003): subscriptions name a topic, publications
    carry one; it replaces the routing tree, so nothing may reshape that tree."""
    if s.skip_ring is not None and s.mode is not Mode.SKIP_RING:
        raise _Invalid("skip_ring", f"only the skip_ring mode has it (mode: {s.mode.value}; "
                       "set mode: skip_ring)")
    if s.mode is not Mode.SKIP_RING:
        return
    from weeble.core.overlay.skipring.node import TOPIC, NotATopic, topic_of

    brokers = s.build_topology().brokers
    for i, b in enumerate((s.skip_ring or SkipRingSpec()).supervisors or ()):
        if b not in brokers:
            raise _Invalid(f"skip_ring.supervisors[{i}]", f"unknown broker {b!r} "
                           f"(brokers: {_listing(brokers)})")
    try:
        s.skip_ring_rom.validate()
    except ConfigError as exc:
        field, _, problem = str(exc).partition(": ")
        raise _Invalid(field, problem) from None
    for i, sub in enumerate(s.subscriptions):
        try:
            topic_of(Filter.parse(sub.filter))
        except NotATopic as exc:
            raise _Invalid(f"subscriptions[{i}].filter", str(exc)) from None
    for i, pub in enumerate(s.publications):
        if not isinstance(pub.attributes.get(TOPIC), str):
            raise _Invalid(f"publications[{i}].attributes", f"the skip_ring mode is "
                           f"topic-based: a publication names its `{TOPIC}` (a string)")
    if s.overlay.kind is not OverlayKind.STATIC:
        raise _Invalid("overlay.kind", "the skip_ring mode keeps its own overlay per topic")
    if s.reconfigurations.operations:
        raise _Invalid("reconfigurations", "the skip_ring mode has no tree to reshape")
    if s.optimizer is not None and s.optimizer.heuristic != "none":
        raise _Invalid("optimizer", "the skip_ring mode has no tree to reshape")
    if s.routing.adverts:
        raise _Invalid("routing.adverts", "the skip_ring mode routes by topic, not adverts")


def _check_optimizer(s: Scenario) -> None:
    o = s.optimizer
    if o is None:
        return
    brokers = set(s.build_topology().brokers)
    for i, (a, b, cost) in enumerate(o.link_costs.links):
        for x in (a, b):
            if x not in brokers:
                raise _Invalid(f"optimizer.link_costs.links[{i}]", f"unknown broker {x!r}")
        if a == b:
            raise _Invalid(f"optimizer.link_costs.links[{i}]", f"a link needs two brokers, "
                           f"got {a!r} twice")
        if cost < 0:
            raise _Invalid(f"optimizer.link_costs.links[{i}]",
                           f"a cost must be >= 0, got {cost}")
    for b, v in o.processing_costs.brokers.items():
        if b not in brokers:
            raise _Invalid("optimizer.processing_costs.brokers", f"unknown broker {b!r}")
        if v < 0:
            raise _Invalid(f"optimizer.processing_costs.brokers.{b}", f"must be >= 0, got {v}")
    if o.heuristic == "none":
        return
    if s.overlay.kind is not OverlayKind.STATIC:
        raise _Invalid("optimizer.heuristic", "the optimizer reshapes the static overlay through "
                       "the coordinated link exchange; the coloured overlay is not supported")
    why = exchange_supported(s.roms()[s.root_broker])
    if why is not None:
        raise _Invalid("optimizer.heuristic", f"its link exchanges need: {why}")


def _plan(s: Scenario) -> list[Step]:
    """Expand every operation on the tree it will meet (the sequential ones in order; one with
    `at` on the tree the previous ones leave), checking each step."""
    topology = s.build_topology()
    tree = Tree.of(topology.links, topology.brokers)
    coloured = s.colours is not None
    rng = random.Random(f"{s.seed}:reconfigurations")
    out: list[Step] = []
    for i, o in enumerate(s.reconfigurations.operations):
        where = f"reconfigurations.operations[{i}]"
        try:
            steps = o.expand(tree, coloured, rng)
        except PlanError as exc:
            field, _, problem = str(exc).partition(": ")
            if field in type(o).model_fields:
                raise _Invalid(f"{where}.{field}", problem) from None
            raise _Invalid(where, str(exc)) from None
        for at, op in steps:
            if at is not None and at >= s.duration:
                raise _Invalid(f"{where}.at", f"{at:g} is not before the end of the run"
                               f" ({s.duration:g} s)")
            if isinstance(op, Tree):
                after = op
            else:
                try:
                    after = apply(tree, op)
                except PlanError as exc:
                    raise _Invalid(where, str(exc)) from None
            if isinstance(op, RemoveLeaf) and op.leaf == s.root_broker:
                raise _Invalid(where, f"remove_leaf: {op.leaf!r} is the root")
            if s.root_broker not in after.nodes:
                raise _Invalid(where, f"the root {s.root_broker!r} cannot leave")
            # The bounds (and the checker's windows) assume d and h hold for every tree.
            diameter = topo.from_edges(sorted(after.edges)).diameter() if after.edges else 0
            if diameter > s.params.d:
                raise _Invalid(where, f"leaves a tree of diameter {diameter} > timing.d ="
                               f" {s.params.d}: set timing.d to the largest diameter of the run")
            colours = s.colours
            if colours is not None:
                parents = after.parents(s.root_broker)
                height = max(_depth(parents, b) for b in after.nodes)
                if height > colours.height:
                    raise _Invalid(where, f"leaves a tree of height {height} > overlay.height"
                                   f" = {colours.height}")
            tree = after
            out.append((at, op))
    return out


def _depth(parents: dict[str, str | None], b: str) -> int:
    depth = 0
    while parents[b] is not None:
        b = parents[b]  # type: ignore[assignment]
        depth += 1
    return depth


def _check_live(live: Live, brokers: int) -> None:
    # Live brokers listen on loopback only: a typo must not aim traffic at a real network.
    try:
        base = ipaddress.IPv4Address(live.base_host)
    except ValueError:
        raise _Invalid("live.base_host", f"{live.base_host!r} is not an IPv4 address") from None
    last = base + (brokers - 1) if int(base) + brokers - 1 <= 0xFFFFFFFF else None
    if not base.is_loopback or last is None or not last.is_loopback:
        raise _Invalid("live.base_host", f"{base}: {brokers} brokers need {brokers} addresses"
                       " inside 127.0.0.0/8 from here")
    ports = {"listen_port": live.listen_port, "admin_port": live.admin_port,
             "metrics_port": live.metrics_port}
    seen: dict[int, str] = {}
    for name, port in ports.items():
        if port:
            if port in seen:
                raise _Invalid(f"live.{name}", f"port {port} is also live.{seen[port]}")
            seen[port] = name


def _listing(names: tuple[str, ...]) -> str:
    return ", ".join(names) if len(names) <= 8 else f"{', '.join(names[:6])}, ... {names[-1]}"
