"""Which checks and which losses belong to an episode (R12, R14, R15), on small hand-built
traces; `weeble check` and the independent checker (written from the contract) agree, and
tests/analytics/test_differential.py holds the Spark twin to the same traces.

- A reconfiguration's transient is its own: the legitimacy checks in its state span (its start
  to its end + D) count neither for nor against the episode before it (issue 28's sweep: an
  exchange 7 s after a repaired corruption failed the corruption's episode by 8.11 s > Δ).
- A fault's row shows what it could have hit: the publications from its episode's begin − D
  (in flight when it struck) up to the next episode's begin − D. Before, those made in
  (begin − D, begin) were in no row at all, though in the run's missing.

Timing (tests/analytics/handmade.py): D = 1 s, A = 6 s, Δ = 11.2 s; identity routing on
b1 - b2; c1 at b1 subscribes `class == 1` at 0, publishers at b2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.analytics.handmade import deliver, header, publish, rec, write
from tests.check import independent_checker
from weeble.check.history import check_run

END = 70.0


def legitimacy(t: float, ok: bool) -> dict[str, Any]:
    return rec(t, "sim", "legitimacy", ok=ok, problems=0 if ok else 1,
               sample=[] if ok else ["b1→b2: spurious entry"], required=1)


def fault(fid: str, begin: float, end: float) -> list[dict[str, Any]]:
    return [rec(begin, "sim", "fault_begin", fault_id=fid, type="drop", target="b1-b2",
                links=["b1-b2"], took_effect=True),
            rec(end, "sim", "fault_end", fault_id=fid, type="drop", target="b1-b2",
                links=["b1-b2"])]


def build(run: Path, *, pubs: list[tuple[float, bool]], faults: list[list[dict[str, Any]]],
          checks: list[tuple[float, bool]],
          reconfigurations: list[tuple[str, float, float]] = ()) -> Path:
    """A run whose publications (time, delivered to c1) are class 1 from p1 at b2."""
    b1 = [rec(0, "b1", "subscribe", client="c1", broker="b1", sub_id="c1/0",
              filter="class == 1")]
    b2 = []
    for seq, (t, delivered) in enumerate(pubs, start=1):
        b2.append(publish(t, "p1", seq, 1))
        if delivered:
            b1.append(deliver(t + 0.1, "c1", "p1", seq))
    sim = [r for f in faults for r in f] + [legitimacy(t, ok) for t, ok in checks]
    for rid, start, finish in reconfigurations:
        sim += [rec(start, "sim", "reconfiguration", rid=rid, op="exchange b1-b2 for b1-b3",
                    phase="started"),
                rec(finish, "sim", "reconfiguration", rid=rid, op="exchange b1-b2 for b1-b3",
                    phase="finished", outcome="done", coordination={"lock": 2})]
    trace = run / "trace"
    trace.mkdir(parents=True, exist_ok=True)
    write(trace / "run.jsonl", [{**header(), "duration": END},
                                rec(END, "sim", "run_end", reason="end")])
    write(trace / "b1.jsonl", sorted(b1, key=lambda r: r["t"]))
    write(trace / "b2.jsonl", b2)
    write(trace / "sim.jsonl", sorted(sim, key=lambda r: r["t"]))
    return run


def exchange_after_episode(run: Path, last_bad: float) -> Path:
    """A fault at 10 (E = 10, E + Δ = 21.2) repaired by 11; an exchange from 22 to 22.4, whose
    state span ends at 23.4; failing checks at 22.2 and 23.0 inside it, and at `last_bad`."""
    checks = [(t, True) for t in (5.0, 11.0, 12.0, 15.0, 20.0, 24.0, 30.0, 40.0)]
    checks += [(10.5, False), (22.2, False), (23.0, False), (last_bad, False)]
    return build(run, pubs=[(t, True) for t in (8.0, 15.0, 30.0, 40.0)],
                 faults=[fault("f1", 10.0, 10.0)], checks=sorted(checks),
                 reconfigurations=[("r1", 22.0, 22.4)])


def agree(run: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    ours, theirs = check_run(run), independent_checker.check(run)
    for o, t in zip(ours["episodes"], theirs["episodes"], strict=True):
        assert (o["state_time"], o["state_status"], o["state_last_failing"]) == pytest.approx(
            (t["state"], t["state_status"], t["state_last_failing"]))
    rows = {f["episode"]: f for f in ours["verdict"]["faults"]}
    for i, t in enumerate(theirs["episodes"]):
        assert {k: rows[i][k] for k in ("lost", "spurious", "duplicated", "reordered")} == {
            k: t[k] for k in ("lost", "spurious", "duplicated", "reordered")}
    return ours, theirs


@pytest.mark.parametrize(("last_bad", "status", "last_failing"), [
    (23.4, "pass", 0.5),  # the span's own edge: inside, left out
    (23.5, "fail", 13.5),  # after the span: the episode's, 13.5 s > Δ
])
def test_a_check_inside_a_reconfiguration_s_state_span_is_not_the_episode_s(
        tmp_path: Path, last_bad: float, status: str, last_failing: float) -> None:
    ours, _ = agree(exchange_after_episode(tmp_path, last_bad))
    [e] = ours["episodes"]
    assert e["state_last_failing"] == pytest.approx(last_failing)
    assert ours["verdict"]["status"] == status
    # the checks are all still counted (R8); the exchange is judged by R15, on the service
    assert ours["legitimacy"]["illegitimate"] == 4
    assert [r["verdict"] for r in ours["operations"]] == ["pass"]


def in_flight(run: Path) -> Path:
    """f1 20-21, f2 50-51 (a new episode: 50 > 21 + Δ). Missing: 19.5 (in flight when f1
    struck, D = 1), 20.5 (during f1), 49.5 (in flight when f2 struck)."""
    pubs = [(10.0, True), (19.5, False), (20.5, False), (25.0, True), (30.0, True),
            (49.5, False), (55.0, True), (60.0, True)]
    checks = [(float(t), True) for t in range(5, 70, 5)]
    return build(run, pubs=pubs, faults=[fault("f1", 20.0, 21.0), fault("f2", 50.0, 51.0)],
                 checks=checks)


def test_a_fault_s_lost_counts_what_was_in_flight_when_it_struck(tmp_path: Path) -> None:
    ours, _ = agree(in_flight(tmp_path))
    assert ours["deliveries"]["missing"] == 3
    assert ours["verdict"]["before_first_fault"]["missing"] == 0
    # each loss in one row: the prefix ends at f1's begin − D, f1's row at f2's begin − D
    assert [(f["fault_id"], f["lost"]) for f in ours["verdict"]["faults"]] == [
        ("f1", 2), ("f2", 1)]
    assert ours["verdict"]["status"] == "pass"  # a fault may lose: shown, not judged


def test_a_fault_names_each_target_once_and_took_effect_if_any_record_says_so(
        tmp_path: Path) -> None:
    """R10 (issue 23 item 5: `weeble analyze` showed `b0,b6,b0,b6` and "took effect: unknown"
    where the trace said it took effect): a fault recorded by several records names each target
    once, in order of first appearance, and took effect if any record says so. The Spark twin
    reads targets through the same `episodes.merge_targets` (tests/analytics/test_differential.py
    holds both equal)."""
    begins = [rec(20.0, node, "fault_begin", fault_id="p", type="partition", target="b1,b2",
                  took_effect=effect) for node, effect in (("b1", None), ("b2", True))]
    begins.append(rec(20.0, "sim", "fault_begin", fault_id="p", type="partition",
                      links=["b2-b1"]))
    ends = [rec(21.0, node, "fault_end", fault_id="p", type="partition", target="b1,b2",
                ok=True) for node in ("b1", "b2")]
    ours, _ = agree(build(tmp_path, pubs=[(t, True) for t in (10.0, 30.0, 40.0)],
                          faults=[begins, ends], checks=[(25.0, True), (35.0, True)]))
    [row] = ours["verdict"]["faults"]
    assert (row["fault_id"], row["target"], row["took_effect"]) == ("p", "b1,b2,b2-b1", True)
    assert ours["verdict"]["status"] == "pass"
