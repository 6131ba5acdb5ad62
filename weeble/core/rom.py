"""ROM: what no fault can touch (DESIGN.md "ROM and RAM").

Code, the broker's id, the root's identity, the routing algorithm, the constants π, ρ, δ_min,
δ_max, d, and the initial overlay: the neighbour set and parent the broker boots with. Chapter 3
keeps the neighbour set in ROM (thesis §3.2.3); from chapter 4 on the overlay changes at run
time, so the broker copies its initial overlay into RAM (layer `overlay`), where reconfigurations
change it and faults may corrupt it, like the initial routing configuration of the wrapper.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from weeble.core.sketch.bloom import MAX_BITS, MAX_HASHES


class Algorithm(StrEnum):
    FLOODING = "flooding"
    SIMPLE = "simple"
    IDENTITY = "identity"
    COVERING1 = "covering1"  # all counts use flag-1 entries only (3.6)
    COVERING2 = "covering2"  # the covering count ignores flags (3.7)
    MERGING1 = "merging1"  # (3.8)
    MERGING2 = "merging2"  # (3.9)

    @property
    def covering(self) -> bool:
        return self in (Algorithm.COVERING1, Algorithm.COVERING2, *MERGING)

    @property
    def merging(self) -> bool:
        return self in MERGING


MERGING = (Algorithm.MERGING1, Algorithm.MERGING2)


class Ordering(StrEnum):
    """The system-wide notification ordering mode of the coordinated link exchange (4.4.2)."""

    NONE = "none"
    FIFO = "fifo"  # FIFO-publisher order (rule R6)
    CAUSAL = "causal"  # causal order (rule R7)


class ConfigError(ValueError):
    """An inconsistent configuration; the message names the field and the problem."""


class OverlayKind(StrEnum):
    """Which overlay layer a broker runs (DESIGN.md "The core as layers")."""

    STATIC = "static"  # the tree of chapter 3, changed only by managed reconfigurations (4.2, 4.4)
    COLOURED = "coloured"  # the self-stabilizing 3-colour tree of 4.5 (seed 001)


# ---- the bounds: each formula written once --------------------------------------------------
#
# A bound is an arithmetic expression over named constants. The same text is evaluated for a
# run (Params.bound and the bounds below, hence the run header's `bound`, the simulator's and
# every checker's Δ) and rendered for the contract (docs/trace-schema.md, weeble.check.doc), so
# the document cannot state another bound than the one the runs use.

_SYMBOLS = {"pi": "π", "rho": "ρ", "delta_max": "δmax", "delta_min": "δmin", "xi": "ξ",
            "Delta": "Δ", "Delta_r": "∆r", "Delta_a": "Δ_a"}


@dataclass(frozen=True, slots=True)
class Formula:
    """A bound: `expr` is Python arithmetic over constant names (and max); `source` says where
    it comes from (an equation of the thesis, a spec section)."""

    expr: str
    source: str

    def __call__(self, **values: float) -> float:
        # a constant of this module, never user input: eval with nothing but max in scope
        return float(eval(self.expr, {"__builtins__": {}, "max": max}, values))

    def text(self) -> str:
        """The formula as the contract prints it: 2*pi + d*delta_max -> 2π + d·δmax."""
        out = re.sub(r"(\d)\*(?=[A-Za-z(])", r"\1", self.expr).replace("*", "·")
        return re.sub(r"[A-Za-z_]+", lambda m: _SYMBOLS.get(m.group(), m.group()), out)


ROUTING_BOUNDS: dict[Algorithm, Formula] = {
    Algorithm.FLOODING: Formula("max(2*pi, d*delta_max)", "(3.2)"),
    Algorithm.SIMPLE: Formula("2*pi + d*delta_max", "(3.4)"),
    Algorithm.IDENTITY: Formula("2*pi + d*delta_max", "(3.5)"),
    Algorithm.COVERING1: Formula("2*pi + d*delta_max", "(3.6)"),
    Algorithm.COVERING2: Formula("2*pi + rho + d*delta_max", "(3.7)"),
    # A merger is dissolved (and withdrawn upstream) the moment one of its constituents expires,
    # and a constituent outlives no lease of its own (core/routing/merging.py): (3.8) holds.
    Algorithm.MERGING1: Formula("2*pi + d*delta_max", "(3.8)"),
    Algorithm.MERGING2: Formula("2*pi + rho + d*delta_max", "(3.9)"),
}
WRAPPER_BOUND = Formula("2*pi + d*delta_max", "(3.10), Theorem 1")
# With advertisements the two routing layers stabilize one after the other (fair composition)
ADVERTS_BOUND = Formula("2*Delta", "(3.11)")
COLOURS_BOUND = Formula("4*xi + h*(2*delta_max - delta_min)", "Eq. 4.3")
COLOURED_RUN_BOUND = Formula("max(Delta, Delta_r)", "routing and overlay, whichever is longer")
ANTI_ENTROPY_BOUND = Formula("2*pi + (K + 1)*T + 2*delta_max + 2*d*delta_max", "spec seed23 §D.2")
SKIP_RING_BOUND = Formula("2*n*S + (L + 2)*T + pi", "spec seed23 §C.1-10, A.7")


def run_bound(routing: float, overlay: float | None) -> float:
    """Δ of a run: its routing's bound, or with a coloured overlay (∆r = `overlay`) the longer
    of the two (COLOURED_RUN_BOUND)."""
    return routing if overlay is None else COLOURED_RUN_BOUND(Delta=routing, Delta_r=overlay)


# Keyword-only: several fields of one type in a row, where a positional call that skips one
# silently shifts the rest (Options(flag_rule, unsub_counts_all) once switched renew_forwarded).
@dataclass(frozen=True, slots=True, kw_only=True)
class Params:
    """Timing constants in seconds. d is the network diameter in hops."""

    pi: float  # leasing period = clock modulus; under the wrapper, the rebuild period at the root
    rho: float  # client refresh period
    delta_min: float
    delta_max: float
    d: int

    def validate(self, algorithm: Algorithm, wrapper: bool) -> None:
        """Reject parameters for which the algorithm's stabilization proof does not hold."""
        if self.rho <= 0:
            raise ConfigError(f"rho: must be > 0, got {self.rho}")
        if self.pi <= 0:
            raise ConfigError(f"pi: must be > 0, got {self.pi}")
        if not 0 <= self.delta_min <= self.delta_max:
            raise ConfigError(
                f"delta_min/delta_max: need 0 <= delta_min <= delta_max, "
                f"got {self.delta_min} and {self.delta_max}"
            )
        if self.d < 0:
            raise ConfigError(f"d: must be >= 0, got {self.d}")
        need, why = self.required_pi(algorithm, wrapper)
        if algorithm is Algorithm.FLOODING and not wrapper:
            if self.pi < need:
                raise ConfigError(f"pi: flooding needs pi >= rho ({why}), got pi={self.pi}")
        elif self.pi <= need:
            raise ConfigError(f"pi: {algorithm.value} needs pi > {why} = {need:g}, got {self.pi:g}")

    def required_pi(self, algorithm: Algorithm, wrapper: bool) -> tuple[float, str]:
        if wrapper:  # Theorem 1 (3.10)
            return self.rho + 2 * self.d * self.delta_max, "rho + 2*d*delta_max"
        if algorithm is Algorithm.FLOODING:  # client<->broker is free: rho = pi suffices
            return self.rho, "rho"
        return self.rho + self.d * (self.delta_max - self.delta_min), (
            "rho + d*(delta_max - delta_min)"  # (3.3)
        )

    def bound(self, algorithm: Algorithm, wrapper: bool, adverts: bool = False) -> float:
        """The algorithm's worst-case stabilization time Δ (spec table "Key bounds").

        With advertisements the two routing layers stabilize one after the other (fair
        composition): Δ_a = 2·Δ, which is (3.11) for the wrapper.
        """
        formula = WRAPPER_BOUND if wrapper else ROUTING_BOUNDS[algorithm]
        delta = formula(pi=self.pi, rho=self.rho, d=self.d, delta_max=self.delta_max)
        return ADVERTS_BOUND(Delta=delta) if adverts else delta


@dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    """Knobs the spec leaves open ([?] items), and switches for the negative tests."""

    # Identity/covering/merging: count only flag-1 entries when deciding to forward a
    # (re)subscription. False reproduces the non-self-stabilizing original (claim 4 negative test).
    flag_rule: bool = True
    # SC-2's second chance: an entry refreshed since the last overrun survives it (its flag is
    # cleared). False is an ablation (issue 28's proof on known defects): every overrun deletes
    # every entry, refreshed or not, so valid entries vanish until their next refresh.
    second_chance: bool = True
    # Keep forwarding the refreshes of the subscription that was forwarded for a filter, so the
    # upstream entry is renewed every ρ. Without it (the thesis as printed), only the first
    # refresh per overrun period goes up: renewals can then be π + ρ apart, longer than an
    # upstream lease is sure to live (π), and valid entries expire in a fault-free run.
    renew_forwarded: bool = True
    # Unsubscriptions: count all entries (True, avoids transient loss) or flag-1 entries only.
    unsub_counts_all: bool = True
    # Coordinated link exchange (4.4.2). Switching off a queue is an ablation: Qsub keeps the
    # FIFO-producer order of (un)subscriptions (R5), Qnot the notification order (R6/R7).
    qsub: bool = True
    qnot: bool = True
    # Ours (spec ch4 §3.11, D12): an a-endpoint holds relayed client (un)subscriptions until End and
    # every cycle broker is gray, so they cannot overtake older ones still on their way along
    # its side. False: the thesis as printed (handled on arrival).
    hold_relays: bool = True
    # Upper bound of the random back-off before an initiator retries a refused lock (fix D10);
    # None: 4·d·δ_max (a lock round trip on the longest cycle), at least δ_max.
    backoff: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Colours:
    """ROM of the 3-colour scheme (thesis 4.5, seed 001; spec ch4 §5): constants and the
    switches for the fixes E1-E4 and the ablations. Only read when Rom.overlay is coloured."""

    xi: float = 0.0  # ξ: the root's recolor period
    height: int = 0  # h: bound on the tree height (≤ η − 1, the thesis's bound), ≥ 1
    degree: int = 0  # b: askForPlaceOrPointer's fan-out bound (A15); 0 = no bound
    # ξ′ of the non-root brokers (A13): "paper" ξ + h·δmax (seed 001 L150, used by the thesis's
    # own stabilization analysis, L6595) or "thesis" ξ + h·(δmax − δmin) (Eq. 4.1). A number
    # overrides both (ablation: too short a timeout fires in fault-free runs).
    timeout: str = "paper"
    xi_prime: float | None = None
    colour_check: bool = True  # seed 001 L137-141: also refuse a recolor whose m.c = c_new
    flag_on_insert: bool = True  # E1: a child inserted by a reconfiguration or a join is flagged
    prune_all: bool = True  # E2: a child that did not ACK leaves every colour's child set
    join_pacing: bool = True  # E3: after a join request, wait until it can be active
    early_control: bool = True  # E4: hold control messages coloured with my c_old
    # Ablation of Fig. 4.20 (L6444-6482): "c_cur" colours client (un)subscriptions with the
    # issuer's c_cur instead of its c_new; T^{c_new} then never fills and is current next round.
    control_colour: str = "c_new"

    def timeout_of(self, params: Params) -> float:
        """ξ′ (A13)."""
        if self.xi_prime is not None:
            return self.xi_prime
        if self.timeout == "thesis":
            return self.xi + self.height * (params.delta_max - params.delta_min)
        return self.xi + self.height * params.delta_max

    def join_wait(self, params: Params) -> float:
        """E3: how long a broker that asked to join waits before it gives up: R's next recolor
        carries the join (≤ ξ), the one after activates it (ξ), and that one reaches the
        joiner within ξ′ − ξ."""
        return 2 * self.xi + self.timeout_of(params) if self.join_pacing else \
            self.timeout_of(params)

    def validate(self, params: Params) -> None:
        """Reject constants for which the scheme's guarantees do not hold."""
        if self.xi <= 0:
            raise ConfigError(f"colours.xi: must be > 0, got {self.xi}")
        if self.height < 1:
            raise ConfigError(f"colours.height: the bound h on the tree height must be >= 1, "
                              f"got {self.height}")
        if self.degree < 0:
            raise ConfigError(f"colours.degree: must be >= 0 (0: no bound), got {self.degree}")
        if self.timeout not in ("paper", "thesis"):
            raise ConfigError(f"colours.timeout: 'paper' or 'thesis', got {self.timeout!r}")
        if self.control_colour not in ("c_new", "c_cur"):
            raise ConfigError(f"colours.control_colour: 'c_new' or 'c_cur', "
                              f"got {self.control_colour!r}")
        need = params.rho + 2 * self.height * params.delta_max
        if self.xi <= need:  # Eq. 4.2: T^{c_new} is complete everywhere before it is used
            raise ConfigError(f"colours.xi: Eq. 4.2 needs xi > rho + 2*h*delta_max = {need:g}, "
                              f"got {self.xi:g}")

    def bound(self, params: Params) -> float:
        """∆r = 4ξ + h(2δmax − δmin) (Eq. 4.3): the overlay is legitimate again this long after
        a partition (detection, parent search, dissemination, activation)."""
        return COLOURS_BOUND(xi=self.xi, h=self.height, delta_max=params.delta_max,
                             delta_min=params.delta_min)


class Mode(StrEnum):
    """How the routing tables are kept correct (issue 14; spec seed23 §D.4)."""

    LEASING = "leasing"  # seed 000: second-chance leases, refreshed end to end every ρ
    ANTI_ENTROPY = "anti_entropy"  # seed 002: per-edge sketch comparison and corrections
    SKIP_RING = "skip_ring"  # seed 003: the supervised skip ring, topic-based


def leased_like(algorithm: Algorithm, mode: Mode | str) -> Algorithm:
    """The algorithm whose lease precondition on π applies (Params.validate): the anti-entropy
    mode leases its client entries only (a client refreshes its own broker every ρ; neighbour
    entries are not leased), as flooding does, so π ≥ ρ suffices there."""
    return Algorithm.FLOODING if Mode(mode) is Mode.ANTI_ENTROPY else algorithm


@dataclass(frozen=True, slots=True, kw_only=True)
class AntiEntropy:
    """ROM of the anti-entropy mode (seed 002; spec seed23 §B.3, B.4, B.5, D.2, D.4): how each
    directed tree edge compares what a broker forwarded with what its neighbour holds.

    Defaults are spec seed23 §D.4: Bloom sketches of m/n = 10 bits per element and k = 7 hashes
    (a single difference escapes one round with probability ≈ 0.8 %), re-salted every round,
    |F| sent beside, an exact exchange every K = 16 rounds."""

    sketch: str = "bloom"  # bloom | full (the table itself, the baseline)
    bits_per_element: float = 10.0  # m/n
    hashes: int = 7  # k
    min_bits: int = 64  # m for small tables
    full_every: int = 16  # K: an exact round every K rounds; 0: never
    on_mismatch: str = "localise"  # localise (send what B(F) certainly lacks) | full
    timer: str = "static"  # static | strawman | adaptive (seed 002 §5)
    period: float = 3.0  # s between two rounds of one directed edge
    threshold: int = 5  # adaptive: unwanted events after a link failure before rounds resume
    reply_timeout: float = 2.0  # periods a round waits for its reply before it is abandoned

    def validate(self) -> None:
        if self.sketch not in ("bloom", "full"):
            raise ConfigError(f"anti_entropy.sketch: 'bloom' or 'full', got {self.sketch!r}")
        if self.on_mismatch not in ("localise", "full"):
            raise ConfigError(f"anti_entropy.on_mismatch: 'localise' or 'full', "
                              f"got {self.on_mismatch!r}")
        if self.timer not in ("static", "strawman", "adaptive"):
            raise ConfigError(f"anti_entropy.timer: 'static', 'strawman' or 'adaptive', "
                              f"got {self.timer!r}")
        if self.bits_per_element <= 0:
            raise ConfigError(f"anti_entropy.bits_per_element: must be > 0, "
                              f"got {self.bits_per_element}")
        if not 1 <= self.hashes <= MAX_HASHES or not 8 <= self.min_bits <= MAX_BITS:
            raise ConfigError(f"anti_entropy: 1 <= hashes <= {MAX_HASHES} and 8 <= min_bits <="
                              f" {MAX_BITS}, got {self.hashes} and {self.min_bits}")
        if self.full_every < 0:
            raise ConfigError(f"anti_entropy.full_every: must be >= 0 (0: never), "
                              f"got {self.full_every}")
        if self.period <= 0 or self.reply_timeout <= 0 or self.threshold < 1:
            raise ConfigError("anti_entropy: period > 0, reply_timeout > 0 and threshold >= 1")

    def bits_for(self, cardinality: int) -> int:
        """m of a sketch of `cardinality` elements: m/n bits each, at least min_bits."""
        return min(MAX_BITS, max(self.min_bits, math.ceil(self.bits_per_element * cardinality)))

    def rounds(self) -> int:
        """Rounds within which an edge's difference is found: K with an exact round every K;
        without, the rounds after which a single difference (the hardest to see, Theorem 3)
        still escapes every re-salted filter with probability below 10⁻⁶ (full: 1)."""
        if self.sketch == "full":
            return 1
        if self.full_every > 0:
            return self.full_every
        p1 = (1.0 - math.exp(-self.hashes / self.bits_per_element)) ** self.hashes
        return max(1, math.ceil(math.log(1e-6) / math.log(p1))) if p1 > 0 else 1

    def bound(self, params: Params) -> float:
        """Δ of the anti-entropy mode: a corrupted local entry is gone within 2π (the clients'
        leases) and its withdrawal crosses the tree in d·δmax; a wrong neighbour entry is found
        by its edge within rounds()+1 periods (+ a reply's round trip) and the correction
        crosses the tree in d·δmax. Conservatively the sum (spec seed23 §D.2: the expected bound is
        (rounds to detect) × T + diameter × δ)."""
        return ANTI_ENTROPY_BOUND(pi=params.pi, K=self.rounds(), T=self.period,
                                  delta_max=params.delta_max, d=params.d)


@dataclass(frozen=True, slots=True, kw_only=True)
class SkipRing:
    """ROM of the supervised skip ring with topic pub/sub (seed 003, spec seed23 §A and §D.4): the
    static supervisor set (topics are sharded over it by MurmurHash3), the two Timeout periods, the
    parameters the paper lost (p(k) = p_base^-k, q) and the switches of our fixes. Only read
    when `Rom.mode` is skip_ring: the broker then runs the skip-ring layer instead of routing."""

    supervisors: tuple[str, ...] = ()
    interval: float = 1.0  # a subscriber's Timeout period (one "timeout interval")
    supervisor_interval: float = 0.25  # the supervisor's Timeout; D.4: >= 4x faster
    p_base: float = 4.0  # action (ii): p(k) = p_base^-k (the paper's formula was lost)
    q: float = 0.5  # action (iv)
    flood: bool = True  # PublishNew over ring and shortcut edges (§4.3)
    push_hints: bool = True  # spec seed23 §A.11 improvements (parent label, EmptyTrie push)
    # spec seed23 §A.13-5: an implausible ring neighbour triggers a request
    plausibility: bool = True
    suspect_after: int = 3  # silent intervals of a ring neighbour before a Suspect (0: never)
    history: bool = False  # a subscribing client also gets the topic's earlier publications
    seed: int = 0  # the subscribers' coin flips (actions (ii), (iv), the trie partner)
    # a member announces each broker it is about to link to through the topic's supervisor
    # (messages.Announce), which that broker admits for `planned_lease` s: a live broker
    # admits link sessions only from its neighbours and planned ones. The live driver turns
    # it on; the simulator has no admission and leaves it off.
    announce: bool = False

    @property
    def planned_lease(self) -> float:
        """How long an announced edge stays planned at the broker it names: 8 Timeout
        intervals (a member re-announces an edge it still uses after half of that)."""
        return 8 * self.interval

    def validate(self) -> None:
        if not self.supervisors:
            raise ConfigError("skip_ring.supervisors: at least one supervisor broker")
        for name in ("interval", "supervisor_interval"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"skip_ring.{name}: must be > 0, got {getattr(self, name)}")
        if self.p_base < 1:
            raise ConfigError(f"skip_ring.p_base: must be >= 1, got {self.p_base}")
        if not 0 <= self.q <= 1:
            raise ConfigError(f"skip_ring.q: must be in [0, 1], got {self.q}")
        if self.suspect_after < 0:
            raise ConfigError(f"skip_ring.suspect_after: must be >= 0, got {self.suspect_after}")

    @staticmethod
    def levels(n: int) -> int:
        """⌈log₂ n⌉ for n brokers: SR(n)'s diameter bound (spec seed23 §A.3), at least 1."""
        return max(1, (n - 1).bit_length())

    def bound(self, params: Params, n: int) -> float:
        """Δ of the skip ring over n brokers (spec seed23 §C.1-10, A.7 [R]): labels are right within
        n supervisor Timeouts of a clean database, ring neighbours within 2n, the shortcuts about
        one member interval per level after that; plus π for the local leases and two intervals
        of message delay and anti-entropy."""
        return SKIP_RING_BOUND(n=n, S=self.supervisor_interval, L=self.levels(n),
                               T=self.interval, pi=params.pi)


class Heuristic(StrEnum):
    """Who reshapes the tree (thesis ch. 5): Cost-and-Interest, or a baseline of §5.6.1."""

    CI = "ci"  # Cost and Interest (5.5)
    MST = "mst"  # l-MST: link costs only
    MIT = "mit"  # l-MIT: common traffic only (maximum interest tree)


@dataclass(frozen=True, slots=True, kw_only=True)
class Optimizer:
    """The tree optimizer's constants (thesis Table 5.2, in seconds instead of ticks) and this
    broker's costs: its processing cost p and the cost of a link to every other broker (the
    physical network's, configured or measured: the "oracle" of spec ch5 §2.4)."""

    heuristic: Heuristic = Heuristic.CI
    broadcast_interval: float = 2.5  # broadcastInterval (250 ticks; a tick = 10 ms here)
    update_interval: float = 2.81  # updateInterval: env entries older than this are dropped
    eta: int = 3  # environmentSize η: broadcasts travel η hops
    cache_size: int = 4608  # cacheSize: consumed notification ids kept (ring buffer)
    filter_size: int = 55296  # filterSize m = 12 · cacheSize bits
    hashes: int = 7  # numberOfHashs k
    start: float = 0.0  # the first broadcast after this (plus a per-broker phase)
    processing_cost: float = 0.0  # p of this broker
    link_costs: tuple[tuple[str, float], ...] = ()  # (broker, c) for every other broker
    seed: int = 0  # the exchanges' back-off seeds and the broadcast phase
    # link costs measured live: the driver measures the round trip to every other broker
    # every `measure_every` s (0: never; the costs above then stay) and hands it in
    # (events.LinkMeasured); c = round-trip ms, rounded up to a multiple of resolution_ms (the
    # jitter of a round trip must not make equal links look different), × cost_per_ms
    measure_every: float = 0.0
    cost_per_ms: float = 1.0
    resolution_ms: float = 5.0

    def validate(self) -> None:
        for name in ("broadcast_interval", "update_interval"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"optimizer.{name}: must be > 0, got {getattr(self, name)}")
        if self.eta < 2:
            raise ConfigError(f"optimizer.eta: a broadcast must reach brokers 2 hops away "
                              f"(eta >= 2), got {self.eta}")
        if (self.cache_size < 1 or not 8 <= self.filter_size <= MAX_BITS
                or not 1 <= self.hashes <= MAX_HASHES):
            raise ConfigError(f"optimizer: cache_size >= 1, 8 <= filter_size <= {MAX_BITS} and"
                              f" 1 <= hashes <= {MAX_HASHES}, got {self.cache_size},"
                              f" {self.filter_size}, {self.hashes}")
        if self.processing_cost < 0 or any(c < 0 for _, c in self.link_costs):
            raise ConfigError("optimizer: costs must be >= 0")
        if self.measure_every < 0 or self.cost_per_ms <= 0 or self.resolution_ms <= 0:
            raise ConfigError(f"optimizer: measure_every >= 0, cost_per_ms > 0 and "
                              f"resolution_ms > 0, got {self.measure_every}, "
                              f"{self.cost_per_ms}, {self.resolution_ms}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Rom:
    broker_id: str
    neighbors: frozenset[str]  # the initial overlay: copied into RAM (layer `overlay`) at boot
    root: str  # identity of the root broker (hierarchical routing, wrapper switches)
    parent: str | None  # the initial neighbour towards the root; None at the root
    algorithm: Algorithm
    params: Params
    hierarchical: bool = False
    wrapper: bool = False  # periodic-rebuild wrapper (thesis §3.4.1) instead of second chance
    options: Options = Options()
    adverts: bool = False  # advertisements (thesis §3.4.2) route the subscriptions
    ordering: Ordering = Ordering.FIFO  # notification order kept across link exchanges
    overlay: OverlayKind = OverlayKind.STATIC
    colours: Colours = Colours()  # the 3-colour scheme's ROM (overlay = coloured)
    optimizer: Optimizer | None = None  # the tree optimizer of ch. 5 (layer `optimize`)
    mode: Mode = Mode.LEASING  # how routing tables are kept correct
    anti_entropy: AntiEntropy = AntiEntropy()  # its ROM (mode = anti_entropy)
    skip_ring: SkipRing = SkipRing()  # its ROM (mode = skip_ring): the topic overlay instead

    @property
    def is_root(self) -> bool:
        return self.broker_id == self.root


# ---- a Rom as plain fields (a live broker's configuration file carries them) ----

def rom_fields(rom: Rom) -> dict[str, Any]:
    """`rom` as JSON-ready fields (the neighbours left out: a configuration holds their
    addresses); `rom_of_fields` is the inverse."""
    return {"broker_id": rom.broker_id, "algorithm": rom.algorithm,
            "params": asdict(rom.params), "root": rom.root, "parent": rom.parent,
            "hierarchical": rom.hierarchical, "wrapper": rom.wrapper,
            "options": asdict(rom.options), "adverts": rom.adverts,
            "ordering": rom.ordering, "overlay": rom.overlay,
            "colours": asdict(rom.colours) if rom.overlay is OverlayKind.COLOURED else None,
            "optimizer": asdict(rom.optimizer) if rom.optimizer is not None else None,
            "mode": rom.mode,
            "anti_entropy": asdict(rom.anti_entropy) if rom.mode is Mode.ANTI_ENTROPY
            else None,
            "skip_ring": asdict(rom.skip_ring) if rom.mode is Mode.SKIP_RING else None}


def rom_of_fields(fields: Mapping[str, Any], neighbors: Iterable[str]) -> Rom:
    """The Rom of `rom_fields` (absent fields: their defaults; enums by value too). Raises
    ConfigError naming the part that does not hold."""
    f = dict(fields)
    mode = Mode(f.get("mode", Mode.LEASING))
    try:
        return Rom(broker_id=f["broker_id"], neighbors=frozenset(neighbors), root=f["root"],
                   parent=f.get("parent"), algorithm=Algorithm(f["algorithm"]),
                   params=Params(**f["params"]), hierarchical=f.get("hierarchical", False),
                   wrapper=f.get("wrapper", False), options=Options(**(f.get("options") or {})),
                   adverts=f.get("adverts", False),
                   ordering=Ordering(f.get("ordering", Ordering.FIFO)),
                   overlay=OverlayKind(f.get("overlay", OverlayKind.STATIC)),
                   colours=Colours(**f["colours"]) if f.get("colours") else Colours(),
                   optimizer=_optimizer(f.get("optimizer")), mode=mode,
                   anti_entropy=_anti_entropy(f.get("anti_entropy")),
                   skip_ring=_skip_ring(f.get("skip_ring"), mode))
    except (KeyError, TypeError) as e:
        raise ConfigError(f"rom: {e}") from None


def _optimizer(fields: dict[str, Any] | None) -> Optimizer | None:
    """The optimizer's ROM from its fields (JSON: link_costs as pairs, heuristic as text)."""
    if not fields:
        return None
    try:
        opt = Optimizer(**{**fields, "heuristic": Heuristic(fields.get("heuristic", "ci")),
                           "link_costs": tuple((str(b), float(c)) for b, c in
                                               fields.get("link_costs", ()))})
        opt.validate()
    except (TypeError, ValueError) as e:
        raise ConfigError(f"optimizer: {e}") from None
    return opt


def _anti_entropy(fields: dict[str, Any] | None) -> AntiEntropy:
    """The anti-entropy ROM from its fields (defaults for the ones left out)."""
    try:
        ae = AntiEntropy(**(fields or {}))
        ae.validate()
    except (TypeError, ValueError) as e:
        raise ConfigError(f"anti_entropy: {e}") from None
    return ae


def _skip_ring(fields: dict[str, Any] | None, mode: Mode) -> SkipRing:
    """The skip-ring ROM from its fields (lists from YAML become tuples)."""
    try:
        fields = dict(fields or {})
        fields["supervisors"] = tuple(fields.get("supervisors", ()))
        sr = SkipRing(**fields)
        if mode is Mode.SKIP_RING:
            sr.validate()
    except (TypeError, ValueError) as e:
        raise ConfigError(f"skip_ring: {e}") from None
    return sr
