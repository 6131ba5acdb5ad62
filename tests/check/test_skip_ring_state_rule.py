"""The skip ring's state rule around a join ("State legitimacy in mode skip_ring", rules (4)-(6)),
on hand-built snapshots, judged alike by the core (`snapshot_problems`) and by the independent
checker: the paper promises the ring's closure only while no subscriber joins or leaves, so a
member's edges are judged only when no broker of the topic is inside a join's A or a leave's L
window (may = need), and a joining broker acting as a member before the supervisor's database
has it is no problem while it is in may."""

from __future__ import annotations

from typing import Any

from tests.check.independent_checker import skip_ring_problems
from weeble.core.overlay.skipring.legitimacy import expected_state, snapshot_problems

TOPIC = "t0"
DB = {0: "b1", 1: "b2", 2: "b4"}  # the supervisor's database (b0 supervises)
JOINER = "b3"  # active at the topic, not yet in the database


def _member(label: int, node: str, *, digest: str = "d") -> dict[str, Any]:
    st = expected_state(DB)[node]

    def ref(r: Any) -> list[Any] | None:
        return None if r is None else [r.node, r.label]

    return {"label": label, "leaving": False, "left": ref(st.left), "right": ref(st.right),
            "ring": ref(st.ring), "shortcuts": {str(k): n for k, n in st.shortcuts.items()},
            "pubs": 3, "digest": digest}


def _views(*, wrong_edge: bool, tries_differ: bool = False) -> dict[str, dict[str, Any]]:
    views: dict[str, dict[str, Any]] = {
        "b0": {"members": {}, "supervised": {TOPIC: {"db": {str(i): v for i, v in DB.items()},
                                                     "dead": [], "corrupted": False}}},
    }
    for label, node in DB.items():
        m = _member(label, node, digest="e" if tries_differ and node == "b4" else "d")
        views[node] = {"members": {TOPIC: m}, "supervised": {}}
    # the joiner has its label from the supervisor's answer... of a join still on its way
    views[JOINER] = {"members": {TOPIC: {"label": 3, "leaving": False, "left": None,
                                         "right": None, "ring": None, "shortcuts": {},
                                         "pubs": 3, "digest": "d"}}, "supervised": {}}
    if wrong_edge:  # b1 already points at the joiner, as the ring re-forms around it
        views["b1"]["members"][TOPIC]["right"] = [JOINER, 3]
    return views


def _judge(views: dict[str, dict[str, Any]], need: set[str],
           may: set[str]) -> tuple[list[str], list[str]]:
    """Both checkers' problems for one round (the independent one on subscription records)."""
    core = snapshot_problems(views, {TOPIC: need}, {TOPIC: may})

    def subs(brokers: set[str]) -> list[dict[str, Any]]:
        return [{"broker": b, "filter": f'topic == "{TOPIC}"'} for b in sorted(brokers)]

    snaps = {b: {"skip_ring": v} for b, v in views.items()}
    return core, skip_ring_problems(snaps, subs(need), subs(may))


def test_a_join_inside_its_window_leaves_the_edges_unjudged() -> None:
    need = set(DB.values())
    core, independent = _judge(_views(wrong_edge=True), need, need | {JOINER})
    assert core == [] and independent == []


def test_after_the_window_the_edges_and_the_unrecorded_member_are_judged() -> None:
    need = set(DB.values())
    core, independent = _judge(_views(wrong_edge=True), need, need)
    assert any("act as members unrecorded" in p and JOINER in p for p in core), core
    assert any("b1:" in p and "expected" in p for p in core), core
    assert f"{TOPIC}: (4) {JOINER} unrecorded" in independent
    assert any(p.startswith(f"{TOPIC}: (6) b1 ") for p in independent), independent


def test_a_settled_ring_with_the_joiner_gone_is_legitimate() -> None:
    views = _views(wrong_edge=False)
    del views[JOINER]
    need = set(DB.values())
    assert _judge(views, need, need) == ([], [])


def test_tries_that_differ_at_an_instant_are_no_state_problem() -> None:
    """Two members' tries of equal size and different content are what a correct run shows while
    publications are on their way (sweep seed 501: b0's own publication flooded to b1 while b2's
    went through the supervisor to r(0) = b1, each member holding one the other had yet to get
    at the check), and a joining member's warm trie differs until anti-entropy has caught it up
    (seed 638): the tries are judged at the service level, by the local clients' deliveries, not
    at an instant of the state level, settled or not."""
    need = set(DB.values())
    joining = _views(wrong_edge=False, tries_differ=True)
    assert _judge(joining, need, need | {JOINER}) == ([], [])
    del joining[JOINER]  # the join has settled
    assert _judge(joining, need, need) == ([], [])
