"""The static tree overlay's legitimacy rule (a `Rule` of core/legitimacy_rules.py, composed by
the broker): a spanning tree of symmetric links, every parent pointer towards the root, and no
broker left inside a reconfiguration."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from weeble.core.legitimacy_rules import Rule


def tree(brokers: Mapping[str, Any], root: str) -> list[str]:
    """Problems that keep the overlay layer from legitimacy; [] means legitimate.

    Legitimate: links are symmetric and name brokers that exist, they form a spanning tree,
    each broker's parent is its neighbour towards `root` (None at the root), and no broker is
    inside a reconfiguration (locked). During a link exchange the overlay is not legitimate by
    this rule (r and a are both links for a while, thesis A2.29): it becomes legitimate again
    when the exchange is over.
    """
    problems: list[str] = []
    names = set(brokers)
    links: set[tuple[str, str]] = set()
    for v in sorted(brokers):
        for n in sorted(brokers[v].neighbors):
            if n not in names:
                problems.append(f"{v}: neighbour {n} is no broker")
            elif v not in brokers[n].neighbors:
                problems.append(f"{v}–{n}: {n} does not have {v} as a neighbour")
            else:
                links.add((min(v, n), max(v, n)))
        if getattr(brokers[v], "locked", False):
            problems.append(f"{v}: locked in a reconfiguration")
    if len(links) != len(names) - 1:
        problems.append(f"{len(names)} brokers need {len(names) - 1} links, have {len(links)}")
    if root not in brokers:
        return [*problems, f"root {root} is no broker"]
    parent: dict[str, str | None] = {root: None}
    order = [root]
    for v in order:
        for n in sorted(brokers[v].neighbors):
            if n in names and n not in parent and v in brokers[n].neighbors:
                parent[n] = v
                order.append(n)
    unreached = sorted(names - set(parent))
    if unreached:
        problems.append(f"not connected to the root {root}: {unreached}")
    for v in sorted(parent):
        if brokers[v].parent != parent[v]:
            problems.append(f"{v}: parent {brokers[v].parent}, towards the root is {parent[v]}")
    return problems


# The overlay of every broker that is not on the coloured overlay (the skip ring's links too).
STATIC = Rule("overlay", lambda broker: True, overlay=tree)
