"""Every job on the hand-built run (tests/analytics/handmade.py), whose answers are known."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.analytics import handmade


def _table(spark: Any, run: Path, name: str) -> list[dict[str, Any]]:
    return [r.asDict() for r in spark.read.parquet(str(run / "analysis" / name)).collect()]


def _pub(spark: Any, run: Path, publisher: str, seq: int) -> dict[str, Any]:
    rows = [r for r in _table(spark, run, "publications")
            if r["publisher"] == publisher and r["seq"] == seq]
    assert len(rows) == 1
    return rows[0]


def test_ingest_skips_torn_last_line_and_reads_both_writers(handmade_summary: dict) -> None:
    ingest = handmade_summary["ingest"]
    assert ingest["torn_lines"] == ["b1.jsonl"]
    assert ingest["by_kind"]["deliver"] == 31  # 29 simulator-style + 2 runtime-style
    assert ingest["by_kind"]["publish"] == 13
    assert ingest["unknown_kinds"] == []


def test_oracle_totals(handmade_summary: dict) -> None:
    d = handmade_summary["deliveries"]
    assert d == {"publications": 13, "judged": 12, "correct": 8, "expected": 27,
                 "delivered": 25, "missing": 2, "window": 3, "spurious": 1, "duplicate": 1,
                 "phantom": 1, "deliveries": 31}


@pytest.mark.parametrize(("publisher", "seq", "want"), [
    ("p1", 1, {"expected": 2, "delivered": 2, "window": 0, "correct": True}),
    # c2 subscribed at 20, so at 21 it is inside its activation window: neither missing...
    ("p1", 2, {"expected": 2, "delivered": 2, "window": 1, "missing": 0, "correct": True}),
    # ...nor spurious when it is delivered, nor missing when it is not
    ("p1", 3, {"expected": 2, "delivered": 2, "window": 0, "missing": 0, "correct": True}),
    ("p1", 4, {"expected": 3, "duplicate": 1, "correct": False}),
    ("p1", 5, {"expected": 1, "spurious": 1, "correct": False}),
    ("p1", 6, {"expected": 3, "missing": 1, "correct": False}),
    ("p1", 7, {"expected": 3, "missing": 1, "correct": False}),
    # delivered 0.2 s after c3 unsubscribed: inside the deactivation window
    ("p1", 9, {"expected": 0, "window": 1, "spurious": 0, "correct": True}),
    # c4 crashed at 60; its lease lingers, so the delivery at 65.5 is allowed, not required
    ("p1", 10, {"expected": 2, "window": 1, "spurious": 0, "correct": True}),
    # too close to the end of the run to be judged
    ("p1", 11, {"judged": False, "expected": 0, "missing": 0, "correct": None}),
    # reordered at c1, but complete: the oracle is content, the ordering job is not
    ("p2", 1, {"expected": 3, "delivered": 3, "correct": True}),
])
def test_oracle_per_publication(spark: Any, handmade_run: Path, handmade_summary: dict,
                                publisher: str, seq: int, want: dict[str, Any]) -> None:
    row = _pub(spark, handmade_run, publisher, seq)
    assert {k: row[k] for k in want} == want


def test_oracle_violations_name_client(spark: Any, handmade_run: Path,
                                       handmade_summary: dict) -> None:
    rows = _table(spark, handmade_run, "violations")
    found = {(r["publisher"], r["seq"], r["client"],
              "missing" if r["missing"] else "phantom" if r["phantom"] else
              "spurious" if r["spurious"] else "duplicate") for r in rows}
    assert found == {("p1", 4, "c1", "duplicate"), ("p1", 5, "c1", "spurious"),
                     ("p1", 6, "c2", "missing"), ("p1", 7, "c2", "missing"),
                     ("p9", 1, "c1", "phantom")}


def test_subscription_intervals(spark: Any, handmade_run: Path, handmade_summary: dict) -> None:
    subs = {r["sub_id"]: (r["start"], r["end"], r["ended_by"])
            for r in _table(spark, handmade_run, "subscriptions")}
    assert subs == {"c1/0": (0.0, None, None), "c2/0": (20.0, None, None),
                    "c3/0": (0.0, 50.0, "unsubscribe"), "c4/0": (0.0, 60.0, "crash")}


def test_ordering_finds_the_out_of_order_delivery(spark: Any, handmade_run: Path,
                                                  handmade_summary: dict) -> None:
    # what R7 checked (first deliveries, subscribers), then what it found
    assert handmade_summary["ordering"] == {"violations": 1, "subscribers_affected": 1,
                                            "pairs_affected": 1, "deliveries": 29,
                                            "subscribers": 4}
    (row,) = _table(spark, handmade_run, "reorderings")
    assert (row["client"], row["publisher"], row["seq"], row["seen_max"]) == ("c1", "p2", 1, 2)


def test_faults_windows_and_evidence(handmade_summary: dict) -> None:
    f1, f2 = handmade_summary["faults"]
    assert (f1["fault_id"], f1["type"], f1["target"], f1["begin"], f1["end"]) == \
        ("f1", "corrupt", "b1", 40.0, 40.0)
    assert f1["took_effect"] is True  # the core's fault record: state changed
    assert (f2["fault_id"], f2["type"], f2["target"], f2["end"]) == ("f2", "drop", "b1-b2", None)
    assert f2["took_effect"] is True  # a drop record inside its window


def test_stabilization_service_and_state(handmade_summary: dict) -> None:
    f1 = handmade_summary["faults"][0]
    # last bad publication at 42, the all-correct tail starts at 45
    assert f1["service_time"] == pytest.approx(5.0)
    assert f1["service_status"] == "stabilized"
    # checks at 41 and 43 fail, from 44 on they pass
    assert f1["state_time"] == pytest.approx(4.0)
    assert f1["bound"] == pytest.approx(handmade.BOUND)
    assert f1["ratio"] == pytest.approx(5.0 / handmade.BOUND)
    assert f1["state_ratio"] == pytest.approx(4.0 / handmade.BOUND)
    assert (f1["lost"], f1["duplicated"], f1["reordered"]) == (1, 0, 0)
    assert f1["pass"] is True


def test_a_fault_that_never_ends_has_no_stabilization(handmade_summary: dict) -> None:
    f2 = handmade_summary["faults"][1]
    assert f2["service_time"] is None and f2["state_time"] is None
    assert f2["service_status"] == "fault never ended"
    assert f2["ratio"] is None and f2["pass"] is False


def test_verdict_fails_for_errors_before_the_first_fault(handmade_summary: dict) -> None:
    v = handmade_summary["verdict"]
    assert v["pass"] is False
    assert v["before_first_fault"] == {"missing": 1, "duplicate": 1, "spurious": 1, "fifo": 1}
    assert any("never ended" in r for r in v["reasons"])


def test_overhead_counts_sends_of_both_writers_and_drops(handmade_summary: dict) -> None:
    o = handmade_summary["overhead"]
    assert o["by_kind"] == {"notify": 3, "sub": 1, "dropped": 1}
    assert o["total"] == 4


def test_latency_quantiles(handmade_summary: dict) -> None:
    lat = handmade_summary["latency"]
    assert lat["deliveries"] == 29  # first deliveries of published notifications
    assert lat["p50"] == pytest.approx(0.5)
    assert lat["max"] == pytest.approx(0.7)


def test_report_and_summary_written(handmade_run: Path, handmade_summary: dict) -> None:
    out = handmade_run / "analysis"
    text = (out / "report.md").read_text()
    assert "## Verdict: FAIL" in text and "| f1 | corrupt | b1 |" in text
    for png in ("correctness.png", "stabilization.png", "overhead.png", "latency.png"):
        assert (out / png).stat().st_size > 1000, png
        assert f"]({png})" in text
    assert (out / "summary.json").exists()
    # each fault's row ends with its status as `weeble check` prints it (a fault that never
    # ended is "not judged", not a failed "NO")
    rows = {line.split("|")[1].strip(): line for line in text.splitlines()
            if line.startswith("| f")}
    faults = handmade_summary["faults"]
    assert {f["status"] for f in faults} - {"pass", "fail"}, faults
    for f in faults:
        assert rows[f["fault_id"]].endswith(f"| {f['status']} |"), rows
