"""The cost model of thesis chapter 5 (spec ch5 §1.2-1.3, §2.4-2.5), as pure functions.

- `tree_cost`: eq. 5.2/5.3, the cost of notifications on a spanning tree: every broker of a
  notification's delivery tree (the minimal subtree joining its publisher's broker and its
  consumers) pays p_v, every link of it c_e.
- `effective_cost`: eq. 5.11, C_{i,j}, the cost Bi estimates for reaching Bj along a path, each
  hop discounted by the share of the traffic the predecessor Bk consumes anyway.
- `phase1_costs`/`decision_rule`: eqs. 5.8-5.10, the basic case, kept to show (property test)
  that the rule is the cost comparison.
- `cycle_costs`: eq. 5.12, one broker's cost_R(e, Ba) for every edge e of a reconfiguration
  cycle; the consensus adds them over the cycle (eq. 5.13) and removes the argmin (eq. 5.14).

Interest is a function given by the caller: `interest(b)` = I_{a,b} and `joint(k, b)` = I_{a,k,b}
as broker a estimates them (its own cache against Bloom summaries, or exact sets in the tests).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

Edge = tuple[str, str]
Interest = Callable[[str], float]
Joint = Callable[[str, str], float]


def link(a: str, b: str) -> Edge:
    return (a, b) if a < b else (b, a)


def tree_cost(edges: Iterable[tuple[str, str]], p: Mapping[str, float],
              c: Callable[[str, str], float],
              traffic: Iterable[tuple[str, Iterable[str], float]]) -> float:
    """cost(N, T) (eq. 5.3): `traffic` is (publisher's broker, consuming brokers, count).

    The delivery tree of a notification is the union of the tree paths from its publisher's
    broker to each consumer (perfect routing, Def. 10)."""
    adj: dict[str, list[str]] = {}
    for a, b in edges:
        adj.setdefault(a, []).append(b)
        adj.setdefault(b, []).append(a)
    total = 0.0
    parents: dict[str, dict[str, str | None]] = {}
    for source, consumers, count in traffic:
        if count == 0:
            continue
        back = parents.get(source)
        if back is None:  # BFS tree rooted at the publisher's broker, once per source
            back = {source: None}
            todo = [source]
            for x in todo:
                for n in adj.get(x, ()):
                    if n not in back:
                        back[n] = x
                        todo.append(n)
            parents[source] = back
        nodes = {source}
        links: set[Edge] = set()
        for v in consumers:
            if v not in back:
                raise ValueError(f"tree_cost: broker {v!r} is not connected to {source!r}")
            while v not in nodes:
                u = back[v]
                assert u is not None
                nodes.add(v)
                links.add(link(u, v))
                v = u
        # two float sums in sum()'s order: compiled, sum() over a generator failed with "int
        # object expected; got float" when a Mapping[str, float] held ints (tests/core/test_ci)
        processing = 0.0
        for v in nodes:
            processing += p[v]
        links_cost = 0.0
        for a, b in links:
            links_cost += c(a, b)
        total += count * (processing + links_cost)
    return total


def effective_cost(path: Sequence[str], interest: Interest, joint: Joint,
                   p: Mapping[str, float], c: Callable[[str, str], float]) -> float:
    """C_{i,j} (eq. 5.11) along `path` = ⟨Bi, …, Bk, Bj⟩ (a tree path, or a path of a cycle
    without one edge): C = c_ij for neighbours, else ((I_ij − I_ikj)/I_ij)·(C_ik + p_k) + c_kj,
    evaluated from Bi's first hop on. I_ij = 0 makes the ratio 0/0: taken as 1, no discount
    (spec ch5 §2.4, [INFERRED])."""
    if len(path) < 2:
        raise ValueError(f"effective_cost: a path needs two brokers, got {list(path)}")
    cost = c(path[0], path[1])
    for t in range(2, len(path)):
        k, j = path[t - 1], path[t]
        ij = interest(j)
        ratio = (ij - joint(k, j)) / ij if ij > 0 else 1.0
        cost = ratio * (cost + p[k]) + c(k, j)
    return cost


def phase1_costs(*, I_ij: float, I_ik: float, I_ikj: float, p_i: float, p_k: float,
                 p_j: float, c_ik: float, c_kj: float, c_ij: float) -> tuple[float, float]:
    """(cost_Bi(T1), cost_Bi(T2)), eqs. 5.8 and 5.9: Bi reaches Bj through Bk in T1; T2 adds
    Bi–Bj and drops Bk–Bj."""
    t1 = (I_ik * (p_i + c_ik + p_k) + I_ij * (p_i + c_ik + p_k + c_kj + p_j)
          - I_ikj * (p_i + c_ik + p_k))
    t2 = I_ik * (p_i + c_ik + p_k) + I_ij * (p_i + c_ij + p_j) - I_ikj * p_i
    return t1, t2


def decision_rule(*, I_ij: float, I_ikj: float, p_k: float, c_ik: float, c_kj: float,
                  c_ij: float) -> bool:
    """Eq. 5.10: c_ij < ((I_ij − I_ikj)/I_ij)·(c_ik + p_k) + c_kj; I_ij = 0 aborts."""
    if I_ij <= 0:
        return False
    return c_ij < (I_ij - I_ikj) / I_ij * (c_ik + p_k) + c_kj


def cycle_edges(path: Sequence[str]) -> list[Edge]:
    """The edges of the cycle a new link path[-1]–path[0] closes, numbered as the request
    numbers them: t = 0 … n−2 is {B_t, B_t+1}, n−1 the new link {B_n−1, B_0}."""
    n = len(path)
    return [(path[t], path[(t + 1) % n]) for t in range(n)]


def cycle_costs(me: str, path: Sequence[str], interest: Interest, joint: Joint,
                p: Mapping[str, float], c: Callable[[str, str], float]) -> list[float]:
    """cost_R(e, me) (eq. 5.12) for every edge e of the cycle, in `cycle_edges` order: the sum
    over the other cycle brokers b of I_{me,b} · C^{\\e}_{me,b}, C along the path in R∖e. `c`
    must know the new link's cost."""
    n = len(path)
    out: list[float] = []
    for t in range(n):
        # R∖e_t is the path B_{t+1}, …, B_{t} around the cycle (indices mod n)
        line = [path[(t + 1 + s) % n] for s in range(n)]
        at = line.index(me)
        total = 0.0
        for b in path:
            if b == me:
                continue
            ib = interest(b)
            if ib == 0:
                continue
            to = line.index(b)
            sub = line[at:to + 1] if to > at else line[to:at + 1][::-1]
            total += ib * effective_cost(sub, interest, joint, p, c)
        out.append(total)
    return out


def choose(costs: Sequence[float]) -> int:
    """Eq. 5.14: the edge whose removal costs least; on a tie the new link (index n−1), i.e. no
    change (spec ch5 §2.10.5)."""
    best = len(costs) - 1
    for t, v in enumerate(costs):
        if v < costs[best]:
            best = t
    return best
