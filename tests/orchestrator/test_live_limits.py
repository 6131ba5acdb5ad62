"""A live limit that cuts a run says so, naming the limit (issue 25): the run's summary names
each one its traces show (weeble run prints them), and a scenario over the wire's batch bound is
refused before any broker starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from weeble.codec.wire import MAX_BATCH, MAX_ITEMS, WireError, check_count
from weeble.model.scenario import ScenarioError, parse_scenario
from weeble.orchestrator.summary import summarize
from weeble.orchestrator.testbed import Testbed
from weeble.trace.writer import LiveSink


def test_the_summary_names_each_live_limit_the_run_hit(tmp_path: Path) -> None:
    b0 = LiveSink(tmp_path / "b0.jsonl", "b0", max_bytes=100_000)
    b1 = LiveSink(tmp_path / "b1.jsonl", "b1", max_bytes=600)
    client = LiveSink(tmp_path / "c1.jsonl", "c1")
    link = {"from": "b0", "to": "b1", "msg": "notify"}
    b0.record("send", link, fate="queued")
    b0.record("send", link, fate="overflow")  # the link's queue was full
    b0.record("drop", link, reason="overflow")
    b0.record("drop", link, reason="cut")  # a link cut by a fault: no limit
    n = {"nid": "pb0#1", "publisher": "pb0", "seq": 1}
    b0.record("undeliverable", n, reason="stream_full", client="c1")
    b0.record("undeliverable", n, reason="no_stream", client="c2")  # no limit either
    try:  # the wire's own words for an envelope over a bound, as the receiver traces them
        check_count(MAX_ITEMS + 1, "ae_correct.subscriptions", "MAX_ITEMS", MAX_ITEMS)
    except WireError as e:
        b0.record("garbage", why=str(e), peer="b1")
    client.record("client_error", op="subscribe", error="RESOURCE_EXHAUSTED: more streams"
                  " than one peer may (max_streams_per_peer = 4096)")
    client.record("client_error", op="publish", error="DEADLINE_EXCEEDED: b0: no"
                  " PublishRequest within 5 s (hello_timeout_s)")
    client.record("client_error", op="subscribe", error="TimeoutError: ")  # its own timeout
    for i in range(20):  # over its 600 bytes: the file is capped
        b1.record("receive", {"from": "b0", "to": "b1", "msg": "notify"}, lseq=i)
    for sink in (b0, b1, client):
        sink.close()

    summary = summarize(tmp_path, ["b0", "b1"])
    assert summary["unreadable_traces"] == []
    assert summary["limits"] == {
        f"MAX_ITEMS = {MAX_ITEMS}": 1,
        "tuning.client_queue_limit/client_queue_bytes": 1,
        "tuning.hello_timeout_s": 1,
        "tuning.link_queue_limit/link_queue_bytes": 2,
        "tuning.max_streams_per_peer": 1,
        "tuning.trace_max_bytes": 1,
    }


def test_a_run_within_its_limits_names_none(tmp_path: Path) -> None:
    b0 = LiveSink(tmp_path / "b0.jsonl", "b0")
    link = {"from": "b0", "to": "b1", "msg": "notify"}
    b0.record("send", link, fate="queued")
    b0.record("drop", link, reason="in_flight")
    b0.record("garbage", why="undecodable", peer="b1")
    b0.close()
    summary = summarize(tmp_path, ["b0"])
    assert summary["unreadable_traces"] == [] and summary["dropped"] == {"in_flight": 1}
    assert summary["limits"] == {}


def test_a_link_batch_over_the_wire_bound_is_refused_naming_both(tmp_path: Path) -> None:
    """live.link_batch beyond MAX_BATCH: every batch would be dropped by its receiver."""
    s = parse_scenario({
        "name": "big-batch", "duration": 1, "topology": {"kind": "chain", "brokers": 2},
        "routing": {"algorithm": "identity"},
        "timing": {"pi": 4, "rho": 2, "delta_min": 0, "delta_max": 0.1},
        "live": {"link_batch": MAX_BATCH + 1}}, source="<test>")
    with pytest.raises(ScenarioError, match=rf"live.link_batch: {MAX_BATCH + 1}, over the"
                                            rf" bound MAX_BATCH = {MAX_BATCH}"):
        Testbed.plan(s, runs_dir=tmp_path, any_ports=True)
