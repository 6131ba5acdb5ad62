"""The coloured overlay's legitimacy rule (the 3-colour scheme, thesis 4.5; a `Rule` of
core/legitimacy_rules.py, composed by the broker).

It looks at the colours the root R calls c_cur and c_old (spec ch4 §5.5): each colour's parent
and child pointers mutually consistent and spanning the brokers from R, every broker's colours a
consistent triple at most one recolor behind R's, and no broker joining. The c_new pointers are
under construction and not judged. (Each colour's tables: routing/legitimacy.py.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from weeble.core.legitimacy_rules import Rule


def colours_of(broker: Any) -> dict[str, Any] | None:
    """A broker's colour state as in its snapshot's `colours`, or None on a static overlay."""
    state = getattr(broker, "colours", None)
    if state is not None:
        return state  # a SnapshotView
    ram = getattr(getattr(broker, "ram", None), "overlay", None)
    if ram is None or not hasattr(ram, "trees"):
        return None
    return {"c_old": ram.c_old, "c_cur": ram.c_cur, "c_new": ram.c_new, "joining": ram.joining,
            "trees": [t.as_dict() for t in ram.trees]}


def _consistent(state: Mapping[str, Any]) -> bool:
    c_new = state["c_new"]
    return state["c_cur"] == (c_new - 1) % 3 and state["c_old"] == (c_new - 2) % 3


def root_colours(brokers: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    root = next(iter(brokers.values())).rom.root
    if root not in brokers:
        root = min(brokers)
    state = colours_of(brokers[root])
    assert state is not None
    return root, state


def coloured_overlay(brokers: Mapping[str, Any], root: str) -> list[str]:
    """Spec ch4 §5.5 (thesis L6315-6336); [] means legitimate (see the module doc)."""
    if root not in brokers:
        return [f"root {root} is no broker"]
    states: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for v, b in sorted(brokers.items()):
        state = colours_of(b)
        if state is None:
            return [f"{v}: not on the coloured overlay"]
        states[v] = state
    r = states[root]
    behind = (r["c_new"] - 1) % 3
    for v, state in sorted(states.items()):
        triple = (state["c_old"], state["c_cur"], state["c_new"])
        if not _consistent(state):
            problems.append(f"{v}: colours (c_old, c_cur, c_new) = {triple} do not rotate")
        elif v != root and state["c_new"] not in (r["c_new"], behind):
            problems.append(f"{v}: colours {triple} are not the root's or one recolor behind")
        if state.get("joining"):
            problems.append(f"{v}: joining the tree")
    for name in ("c_cur", "c_old"):
        c = r[name]
        parent = {v: s["trees"][c]["parent"] for v, s in states.items()}
        children = {v: set(s["trees"][c]["children"]) for v, s in states.items()}
        where = f"colour {c} ({name})"
        for v in sorted(states):
            p = parent[v]
            if v == root:
                if p is not None:
                    problems.append(f"{where}: the root {v} has parent {p}")
            elif p is None:
                problems.append(f"{where}: {v} has no parent")
            elif p not in states:
                problems.append(f"{where}: {v}'s parent {p} is no broker")
            elif v not in children[p]:
                problems.append(f"{where}: {v}'s parent {p} does not have it as a child")
            for x in sorted(children[v]):
                if x not in states:
                    problems.append(f"{where}: {v}'s child {x} is no broker")
                elif parent[x] != v:
                    problems.append(f"{where}: {v}'s child {x} has parent {parent[x]}")
        reached = {root}
        todo = [root]
        while todo:  # along consistent pointers only
            v = todo.pop()
            for x in sorted(children[v]):
                if x in states and x not in reached and parent[x] == v:
                    reached.add(x)
                    todo.append(x)
        unreached = sorted(set(states) - reached)
        if unreached:
            problems.append(f"{where}: not connected to the root {root}: {unreached}")
    return problems


COLOURED = Rule("overlay", lambda broker: colours_of(broker) is not None,
                overlay=coloured_overlay)
