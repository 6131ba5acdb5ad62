"""The Markov-chain cost model of thesis §3.5: self-stabilizing filtering against flooding.

Pure Python (no Spark, no numpy): the closed forms (3.12)–(3.34) for a complete m-ary tree with
subscribers at the leaves, and the recursion of the generalization (§3.5.4, (3.35)–(3.57)) for
any tree with per-broker, per-class subscription and publication rates.

Model (§3.5.1): hierarchical, identity-based routing; per (broker, class) the number of local
subscriptions is an M/M/∞ queue (Poisson arrivals at rate λ, exponential lifetimes at rate µ),
so it is Poisson(λ/µ) in equilibrium and a broker has none with probability p0 = e^{-λ/µ}.
Every rate is in messages per second over all links; client↔broker messages are not counted.

Names follow the thesis:
    b_f  flooding traffic (3.20)             b_n  notification traffic of filtering (3.23)
    b_s  saving with root publishers (3.25)  b_p  extra upward traffic of non-root publishers (3.32)
    b_l  leasing (refresh) traffic (3.26)    b_o  toggle traffic (3.31)
    b_c  control traffic b_o + b_l (3.33)    b    overall saving b_s − b_p − b_c (3.34)
    x    expected number of remote routing entries (3.22)
    o    messages per leaf toggle (3.27)     m_o  leaf toggle rate (3.30)

Where the printed formulas are wrong we use the corrected form; `ERRATA` lists each one and the
reports that use this module print it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field


class CostModelError(ValueError):
    """Parameters outside the model (a negative rate, a tree with a cycle, ...)."""


@dataclass(frozen=True)
class Erratum:
    """One place where the printed §3.5 differs from what this module computes."""

    where: str
    printed: str
    used: str
    why: str


ERRATA: tuple[Erratum, ...] = (
    Erratum(where="(3.36)", printed="ω^f = Σ_B ω^f", used="ω^f = Σ_B ω^f(B)",
            why="the per-broker publication rates must add up to the class's rate"),
    Erratum(where="(3.42)", printed="b_p^f(B) sums over the direct children of B only",
            used="(3.45): b′_p = Σ_f Σ_B ω^f(B) · Σ_{B′∈P(B)} P0^f(B′)",
            why="(3.42) misses publishers deeper than one level below B; (3.45) is the form "
                "the thesis reduces to (3.32)"),
    Erratum(where="(3.49), (3.57)", printed="b′_s = b′_f − b′_n + b′_p", used="b′_f − b′_n − b′_p",
            why="extra upward messages of non-root publishers reduce the saving, as in (3.34)"),
    Erratum(where="(3.53)", printed="b′_o = Σ_f Σ_{B∈B} M_o^f(B)", used="the root R excluded",
            why="a toggle of the root sends no message; (3.54) itself sums levels 1…k−1, and "
                "only without R does the recursion give b_o = o·m_o"),
    Erratum(where="l.2450–2454", printed="max b_o 117 (1174) with µ⁻¹ = 60 s (600 s)",
            used="117.35 for µ⁻¹ = 600 s, 1173.5 for µ⁻¹ = 60 s",
            why="b_o is proportional to µ: the shorter lifetime gives the larger traffic"),
    Erratum(where="l.2303, Fig. 3.12", printed="b_l → 2000 s⁻¹ for ρ = 600 s",
            used="b_l → z·l/ρ: 2000 s⁻¹ for ρ = 60 s, 200 s⁻¹ for ρ = 600 s",
            why="(3.26) b_l = x/ρ"),
    Erratum(where="l.2514–2516", printed="b_f − b_n is at most l/(k−1) times b_p",
            used="at least l/(k−1) times b_p",
            why="b_s/b_p rises from l/(k−1) = 30 at N̄ → 0 to m^{k−1} = 81; the 3.3 % "
                "conclusion holds"),
    Erratum(where="l.2544", printed="break-even where b_c = bs − bn",
            used="break-even where b = b_s − b_p − b_c = 0 (3.34)", why="a slip for (3.34)"),
    Erratum(where="l.3035", printed="arrival rates of the leaf brokers that are ancestors of B",
            used="descendants of B", why="(3.51) sums over the subtree"),
    Erratum(where="Fig. 3.2 caption vs l.1642", printed="bc1…bc4 mapped to (µ, ρ) inconsistently",
            used="curves named by their (µ⁻¹, ρ) parameters", why="caption and text disagree"),
)


# ---------------------------------------------------------------------------------------------
# Closed forms for the complete m-ary tree (§3.5.1–§3.5.3)


@dataclass(frozen=True)
class CompleteTree:
    """A complete m-ary tree with k levels; level i (0 = root) holds m^i brokers."""

    m: int
    k: int

    def __post_init__(self) -> None:
        if self.m < 1 or self.k < 1:
            raise CostModelError(f"a complete tree needs m ≥ 1 and k ≥ 1, got m={self.m}, "
                                 f"k={self.k}")

    @property
    def n_brokers(self) -> int:
        """(3.12) N_B = Σ_{i<k} m^i."""
        return sum(self.m**i for i in range(self.k))

    @property
    def n_leaves(self) -> int:
        """(3.13) N_L = m^{k−1}."""
        return self.m ** (self.k - 1)

    @property
    def n_links(self) -> int:
        """(3.14) l = N_B − 1."""
        return self.n_brokers - 1


@dataclass(frozen=True)
class ClosedForm:
    """The closed forms (3.18)–(3.34) at one equilibrium number of subscriptions N̄."""

    n_subscriptions: float
    n_bar: float
    p0: float
    x: float
    o: float
    b_f: float
    b_n: float
    b_s: float
    b_l: float
    m_o: float
    b_o: float
    b_p: float

    @property
    def b_c(self) -> float:
        """(3.33) control traffic: toggles plus leasing."""
        return self.b_o + self.b_l

    @property
    def b_root(self) -> float:
        """(3.21) the saving when every notification is published at the root."""
        return self.b_s - self.b_c

    @property
    def b_leaf(self) -> float:
        """(3.34) the saving when notifications are published at the leaves (the simulation)."""
        return self.b_s - self.b_p - self.b_c

    @property
    def saved_leaf(self) -> float:
        """The simulation's 'bs' (Fig. 3.2): notification traffic saved with leaf publishers."""
        return self.b_s - self.b_p

    def as_dict(self) -> dict[str, float]:
        return {
            "n_subscriptions": self.n_subscriptions, "n_bar": self.n_bar, "p0": self.p0,
            "x": self.x, "o": self.o, "b_f": self.b_f, "b_n": self.b_n, "b_s": self.b_s,
            "b_l": self.b_l, "m_o": self.m_o, "b_o": self.b_o, "b_p": self.b_p,
            "b_c": self.b_c, "b_root": self.b_root, "b_leaf": self.b_leaf,
            "saved_leaf": self.saved_leaf,
        }


def _check_rates(*, omega: float, mu: float, rho: float) -> None:
    if not (math.isfinite(omega) and omega >= 0):
        raise CostModelError(f"publication rate ω must be finite and ≥ 0, got {omega}")
    if not (math.isfinite(mu) and mu > 0):
        raise CostModelError(f"death rate µ must be finite and > 0, got {mu}")
    if not (math.isfinite(rho) and rho > 0):
        raise CostModelError(f"refresh period ρ must be finite and > 0, got {rho}")


def closed_form(*, tree: CompleteTree, z: int, n_subscriptions: float, omega: float, mu: float,
                rho: float) -> ClosedForm:
    """(3.18)–(3.34) for N̄ subscriptions spread uniformly over the leaves and z classes.

    `omega` is the total publication rate (s⁻¹), `mu` the death rate (1/mean lifetime, s⁻¹),
    `rho` the refresh period (s).
    """
    _check_rates(omega=omega, mu=mu, rho=rho)
    if z < 1:
        raise CostModelError(f"the number of filter classes z must be ≥ 1, got {z}")
    if not (math.isfinite(n_subscriptions) and n_subscriptions >= 0):
        raise CostModelError(f"N̄ must be finite and ≥ 0, got {n_subscriptions}")
    m, k = tree.m, tree.k
    n_leaves, n_links = tree.n_leaves, tree.n_links
    n_bar = n_subscriptions / (n_leaves * z)  # (3.19)
    p0 = math.exp(-n_bar)  # (3.18)
    # (3.22): the m^{i+1} (level-i broker, child) pairs; each child subtree has m^{k-2-i} leaves.
    x = z * (n_links - sum(m ** (i + 1) * p0 ** (m ** (k - 2 - i)) for i in range(k - 1)))
    b_f = omega * n_links  # (3.20)
    b_n = omega * x / z  # (3.23)
    b_l = x / rho  # (3.26)
    # (3.27): a level-i inner broker forwards a toggle iff its other leaves are all in state 0.
    # The empty sum gives o = 0 for k = 1, and 0**0 = 1 gives o = 1 for k = 2, as the text says.
    o = sum(p0 ** (m**i - 1) for i in range(k - 1))
    m_o = n_leaves * z * 2 * n_bar * mu * p0  # (3.29), (3.30)
    return ClosedForm(
        n_subscriptions=n_subscriptions, n_bar=n_bar, p0=p0, x=x, o=o, b_f=b_f, b_n=b_n,
        b_s=b_f - b_n,  # (3.25)
        b_l=b_l, m_o=m_o,
        b_o=o * m_o,  # (3.31)
        b_p=omega * p0 * o,  # (3.32)
    )


# ---------------------------------------------------------------------------------------------
# The generalization (§3.5.4): any tree, per-broker and per-class rates


@dataclass(frozen=True)
class Tree:
    """A rooted broker tree: brokers are 0…n−1, `parents[b]` is b's parent, None for the root."""

    parents: tuple[int | None, ...]
    children: tuple[tuple[int, ...], ...] = field(init=False, repr=False, compare=False)
    order: tuple[int, ...] = field(init=False, repr=False, compare=False)  # root first (BFS)

    def __post_init__(self) -> None:
        n = len(self.parents)
        if n == 0:
            raise CostModelError("a tree needs at least one broker")
        roots = [b for b, p in enumerate(self.parents) if p is None]
        if len(roots) != 1:
            raise CostModelError(f"a tree has exactly one root (parent None), got {len(roots)}")
        children: list[list[int]] = [[] for _ in range(n)]
        for b, p in enumerate(self.parents):
            if p is not None:
                if not 0 <= p < n or p == b:
                    raise CostModelError(f"broker {b} has parent {p}, not another broker 0…{n-1}")
                children[p].append(b)
        order = [roots[0]]
        for b in order:  # BFS; grows while iterating
            order.extend(children[b])
        if len(order) != n:
            unreached = sorted(set(range(n)) - set(order))
            raise CostModelError(f"brokers {unreached[:5]} are not below the root (a cycle)")
        object.__setattr__(self, "children", tuple(tuple(c) for c in children))
        object.__setattr__(self, "order", tuple(order))

    @property
    def root(self) -> int:
        return self.order[0]

    @property
    def n_brokers(self) -> int:
        return len(self.parents)

    @property
    def leaves(self) -> tuple[int, ...]:
        return tuple(b for b in self.order if not self.children[b])

    @property
    def n_links(self) -> int:
        """(3.47)–(3.48) l′: the recursion counts every child once, i.e. the tree's edges."""
        return self.n_brokers - 1

    @classmethod
    def complete(cls, tree: CompleteTree) -> Tree:
        """The complete m-ary tree in BFS numbering: broker b's children are m·b+1 … m·b+m."""
        return cls(parents=tuple(None if b == 0 else (b - 1) // tree.m
                                 for b in range(tree.n_brokers)))


def _per_broker(tree: Tree, values: Mapping[int, float] | float, what: str,
                *, positive: bool = False) -> tuple[float, ...]:
    if isinstance(values, int | float):
        out = [float(values)] * tree.n_brokers
    else:
        out = [0.0] * tree.n_brokers
        for b, v in values.items():
            if not 0 <= b < tree.n_brokers:
                raise CostModelError(f"{what}: broker {b} is not in the tree "
                                     f"(0…{tree.n_brokers - 1})")
            out[b] = float(v)
    for b, v in enumerate(out):
        if not math.isfinite(v) or v < 0 or (positive and v == 0):
            raise CostModelError(f"{what} at broker {b} must be finite and "
                                 f"{'> 0' if positive else '≥ 0'}, got {v}")
    return tuple(out)


@dataclass(frozen=True)
class ClassLoad:
    """The rates of one filter class f, per broker (brokers not named have rate 0).

    arrival      λ^f(B): subscriptions for f by B's local clients, s⁻¹
    death        µ^f(B): the death rate of those subscriptions, s⁻¹ (one number: everywhere)
    publication  ω^f(B): notifications of class f published at B, s⁻¹
    """

    arrival: Mapping[int, float]
    publication: Mapping[int, float]
    death: Mapping[int, float] | float


@dataclass(frozen=True)
class General:
    """The generalized model's totals over all classes, plus per-broker detail.

    `entries[B]` is the expected number of remote routing entries at B (pointing to children);
    `toggles[B]` the rate of toggle messages B sends to its parent (0 at the root).
    """

    x: float
    n_links: int
    b_f: float
    b_n: float
    b_p: float
    b_l: float
    b_o: float
    entries: tuple[float, ...]
    toggles: tuple[float, ...]

    @property
    def b_s(self) -> float:
        """b′_f − b′_n: the saving if everything were published at the root (3.25)."""
        return self.b_f - self.b_n

    @property
    def b_c(self) -> float:
        return self.b_o + self.b_l

    @property
    def b(self) -> float:
        """(3.57) with the sign of b′_p corrected: b′_s − b′_p − b′_l − b′_o."""
        return self.b_s - self.b_p - self.b_c


def general(*, tree: Tree, classes: Sequence[tuple[ClassLoad, int]], rho: float) -> General:
    """(3.35)–(3.57), corrected as in `ERRATA`, for `classes` = (load, how many such classes).

    Identical classes are given once with a multiplicity, so z = 1000 uniform classes cost one
    pass over the tree.
    """
    if not (math.isfinite(rho) and rho > 0):
        raise CostModelError(f"refresh period ρ must be finite and > 0, got {rho}")
    n, root = tree.n_brokers, tree.root
    bottom_up = tree.order[::-1]
    x_total = b_f = b_n = b_p = b_o = 0.0
    entries = [0.0] * n
    toggles = [0.0] * n
    for load, count in classes:
        if count < 0:
            raise CostModelError(f"a class multiplicity must be ≥ 0, got {count}")
        lam = _per_broker(tree, load.arrival, "arrival rate λ^f(B)")
        omega = _per_broker(tree, load.publication, "publication rate ω^f(B)")
        mu = _per_broker(tree, load.death, "death rate µ^f(B)", positive=True)
        p_none = [0.0] * n  # P0^f(B) (3.37): no subscription anywhere in B's subtree
        x = [0.0] * n  # x^f(B) (3.38): remote entries in B's subtree
        lam_sub = [0.0] * n  # λ_a^f(B) (3.51): arrivals anywhere in B's subtree
        for b in bottom_up:
            p = math.exp(-lam[b] / mu[b])  # (3.35)
            xb = 0.0
            la = lam[b]
            for c in tree.children[b]:
                p *= p_none[c]
                xb += 1.0 - p_none[c] + x[c]
                entries[b] += count * (1.0 - p_none[c])
                la += lam_sub[c]
            p_none[b], x[b], lam_sub[b] = p, xb, la
        # (3.45): a notification published at B is an extra message on the link above each
        # B′ ∈ P(B) (B and its ancestors, without R) whose subtree holds no subscriber.
        above = [0.0] * n  # Σ_{B′∈P(B)} P0^f(B′), computed top-down
        for b in tree.order:
            if b != root:
                parent = tree.parents[b]
                assert parent is not None
                above[b] = p_none[b] + above[parent]
        omega_f = sum(omega)  # (3.36), corrected
        x_total += count * x[root]  # (3.39)
        b_f += count * omega_f * tree.n_links  # (3.46)
        b_n += count * omega_f * x[root]  # (3.40)
        b_p += count * sum(omega[b] * above[b] for b in range(n))  # (3.45)
        for b in range(n):
            if b != root:  # (3.53) without R: a root toggle sends nothing
                rate = 2.0 * lam_sub[b] * p_none[b]  # (3.52)
                toggles[b] += count * rate
                b_o += count * rate
    return General(x=x_total, n_links=tree.n_links, b_f=b_f, b_n=b_n, b_p=b_p,
                   b_l=x_total / rho,  # (3.50)
                   b_o=b_o, entries=tuple(entries), toggles=tuple(toggles))


def uniform_leaf_classes(*, tree: Tree, z: int, n_subscriptions: float, omega: float, mu: float,
                         publishers: str = "leaves") -> list[tuple[ClassLoad, int]]:
    """The §3.5.1 example as input to `general`: z classes, subscribers at the leaves only.

    `publishers` is "leaves" (uniform over leaves, the simulation's setting) or "root".
    """
    if z < 1:
        raise CostModelError(f"the number of filter classes z must be ≥ 1, got {z}")
    _check_rates(omega=omega, mu=mu, rho=1.0)
    leaves = tree.leaves
    lam = n_subscriptions / (len(leaves) * z) * mu  # n̄ = λ/µ (3.16)
    if publishers == "leaves":
        publication = {b: omega / z / len(leaves) for b in leaves}
    elif publishers == "root":
        publication = {tree.root: omega / z}
    else:
        raise CostModelError(f"publishers must be 'leaves' or 'root', got {publishers!r}")
    load = ClassLoad(arrival={b: lam for b in leaves}, publication=publication, death=mu)
    return [(load, z)]


# ---------------------------------------------------------------------------------------------
# Numerics for the claims: first zero crossing and the maximum of a one-hump curve


def first_zero_crossing(f: Callable[[float], float], *, lo: float, hi: float, step: float,
                        tolerance: float = 1e-6) -> float | None:
    """The first x in [lo, hi] where f goes from ≥ 0 to < 0, to `tolerance`; None if it never does.

    Scans in steps of `step`, then bisects the first bracket: the break-even is the *first* N̄ at
    which filtering stops paying, even if a curve were to come back above zero later.
    """
    if not (step > 0 and hi > lo):
        raise CostModelError(f"need lo < hi and step > 0, got lo={lo}, hi={hi}, step={step}")
    a, fa = lo, f(lo)
    if fa < 0:
        return lo
    while a < hi:
        b = min(a + step, hi)
        fb = f(b)
        if fb < 0:
            while b - a > tolerance:
                mid = (a + b) / 2
                if f(mid) < 0:
                    b = mid
                else:
                    a = mid
            return (a + b) / 2
        a, fa = b, fb
    return None


def maximize(f: Callable[[float], float], *, lo: float, hi: float,
             tolerance: float = 1e-3) -> tuple[float, float]:
    """(argmax, max) of a unimodal f on [lo, hi] by golden-section search."""
    inv_phi = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - inv_phi * (b - a), a + inv_phi * (b - a)
    fc, fd = f(c), f(d)
    while b - a > tolerance:
        if fc > fd:
            b, d, fd = d, c, fc
            c = b - inv_phi * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + inv_phi * (b - a)
            fd = f(d)
    x = (a + b) / 2
    return x, f(x)
