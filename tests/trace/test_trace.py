"""The trace contract: writer (sim and live sinks), reader (torn last line), header, schema."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.analytics import handmade
from weeble.core.messages import Notification, Notify
from weeble.trace import schema, writer
from weeble.trace.header import RunHeader
from weeble.trace.reader import (
    RunDirError,
    TraceFormatError,
    TraceVersionError,
    read_header,
    read_run,
    read_trace,
)
from weeble.trace.writer import LiveSink, SimSink, message_ids

GOOD = handmade.rec(1, "b1", "subscribe", client="c1", broker="b1", sub_id="c1/0",
                    filter="class == 1")


def _lines(path: Path, *records: dict[str, Any], tail: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)
    return path


# ---- reader -----------------------------------------------------------------------------------


def test_reader_skips_a_torn_last_line_only(tmp_path: Path) -> None:
    path = _lines(tmp_path / "b1.jsonl", GOOD, GOOD, tail='{"v":2,"t":5,"no')
    assert len(list(read_trace(path))) == 2
    path = _lines(tmp_path / "b2.jsonl", GOOD, tail=json.dumps(GOOD))  # complete, no newline
    assert len(list(read_trace(path))) == 2
    text = json.dumps(GOOD) + "\n"
    path.write_bytes(text.encode() + '{"v":2,"t":9,"s":"é'.encode()[:-1])  # cut in a character
    assert len(list(read_trace(path))) == 1


def test_reader_names_file_and_line_of_a_bad_middle_line(tmp_path: Path) -> None:
    path = tmp_path / "b1.jsonl"
    path.write_text(json.dumps(GOOD) + "\n{oops\n" + json.dumps(GOOD) + "\n")
    with pytest.raises(TraceFormatError, match=r"b1\.jsonl:2: not a JSON record"):
        list(read_trace(path))


def test_reader_rejects_another_version_naming_file_line_and_version(tmp_path: Path) -> None:
    path = _lines(tmp_path / "b1.jsonl", GOOD, {**GOOD, "v": 1})
    with pytest.raises(TraceVersionError, match=r"b1\.jsonl:2: trace schema version 1; this "
                                                r"weeble reads version 2; re-run it"):
        list(read_trace(path))


def test_reader_checks_required_fields_and_types(tmp_path: Path) -> None:
    d = handmade.deliver(2, "c1", "p1", 1)
    (rec,) = read_trace(_lines(tmp_path / "a.jsonl", d))
    assert (rec["client"], rec["broker"], rec["nid"], rec["sub_id"]) == ("c1", "b1", "p1#1",
                                                                         "c1/0")
    no_seq = {k: v for k, v in d.items() if k != "seq"}
    with pytest.raises(TraceFormatError, match="deliver record lacks field 'seq'"):
        list(read_trace(_lines(tmp_path / "b.jsonl", no_seq)))
    with pytest.raises(TraceFormatError, match=r"deliver\.seq is not int"):
        list(read_trace(_lines(tmp_path / "c.jsonl", {**d, "seq": "one"})))


def test_every_field_has_one_type_across_kinds() -> None:
    fields = schema.all_fields()  # raises on a conflict
    assert fields["seq"] is schema.Type.INT and fields["attributes"] is schema.Type.JSON
    assert set(fields) - set(schema.HEADER) <= set(schema.FIELD_DOC)  # every field explained


def test_header_round_trip_and_errors(tmp_path: Path) -> None:
    handmade.build(tmp_path)
    info = read_header(tmp_path)
    h = info.header
    assert (h.scenario, h.algorithm.value, h.params.d, h.backend) == ("handmade", "identity", 2,
                                                                      "sim")
    assert h.bound == pytest.approx(handmade.BOUND) and info.end_ns == 100 * handmade.NS
    assert (h.activation, h.deactivation, h.crash_linger) == pytest.approx((6.0, 1.0, 11.2))
    assert RunHeader.from_record({**handmade.header(), **h.fields()}) == h
    bad = {**handmade.header(), "pi": 1.0}  # too short a lease for identity routing
    _lines(tmp_path / "trace" / "run.jsonl", bad)
    with pytest.raises(TraceFormatError, match=r"run\.jsonl: run record: pi: identity needs"):
        read_header(tmp_path)
    (tmp_path / "trace" / "run.jsonl").unlink()
    with pytest.raises(RunDirError, match=r"no run header \(trace/run\.jsonl\)"):
        read_header(tmp_path)


def test_read_run_merges_files_in_time_order(tmp_path: Path) -> None:
    run = read_run(handmade.build(tmp_path))
    times = [r["t"] for r in run.records]
    assert times == sorted(times)
    assert run.end == 100.0 and [Path(p).name for p in run.torn] == ["b1.jsonl"]
    assert {r["node"] for r in run.records} >= {"b1", "b2", "c4", "sim"}


# ---- writers ----------------------------------------------------------------------------------


def test_live_sink_writes_off_the_hot_path_and_on_close(tmp_path: Path) -> None:
    path = tmp_path / "b1.jsonl"
    sink = LiveSink(path, "b1", flush_interval=0.05)
    sink.record("note", {"kind": "clash", "nid": "p#1"}, seq=1)
    deadline = time.monotonic() + 5
    while not path.read_text() and time.monotonic() < deadline:  # the flusher thread writes it
        time.sleep(0.01)
    (rec,) = list(read_trace(path))
    assert rec["v"] == schema.VERSION and rec["node"] == "b1" and rec["kind"] == "note"
    assert isinstance(rec["t"], int) and rec["nid"] == "p#1" and rec["seq"] == 1
    assert rec["_kind"] == "clash"  # a field never overwrites the header
    slow = LiveSink(tmp_path / "b2.jsonl", "b2", flush_interval=60)
    slow.record("start")
    slow.close()  # close writes what is queued
    assert [r["kind"] for r in read_trace(tmp_path / "b2.jsonl")] == ["start"]
    sink.close()


# values of every kind a notification may carry, and some no wire gives (those take the general
# encoder, which must still give the same bytes): escapes, non-ASCII, floats JSON has no form for
# or that print with an exponent, ints beyond 64 bits, bools, sets, non-str keys
ODD_NOTIFICATIONS = [
    Notification("src", 1, {"class": 0, "n": 1}, 1764290000.123456),
    Notification('p"ü\n\x01\u2028\\', -5, {"s": 'x"y\t', "f": 1e16, "b": True,
                                         "l": [1, {"a": None}], "n": None}, float("nan")),
    Notification("src", 2**64, {"big": 2**70}, 1e-7),
    Notification("src", 2**64 - 1, {1: 2}, float("inf")),
    Notification("src", True, {"set": {3, 1}}, 3),  # type: ignore[arg-type]
    Notification("a", 7, {"x": 1.5}, -0.0),
    Notification("a", 8, {}, 0),
]
SUB_IDS = ["s.1", None, 'q"é', None, "s.1", "s.1", None]


def _untimed(line: bytes) -> bytes:
    return re.sub(rb'^\{"v":2,"t":\d+,', b'{"v":2,"t":0,', line, count=1)


def test_live_sink_batch_records_are_the_generic_records_byte_for_byte(tmp_path: Path) -> None:
    """`published` and `delivered` (one queue entry per request or write, encoded without a
    dict per record) write exactly what `record` writes for each notification, `t` aside,
    and only when flushed: close writes what is queued."""
    path = tmp_path / "b1.jsonl"
    sink = LiveSink(path, "b1", flush_interval=60)
    ns = ODD_NOTIFICATIONS
    sink.published("c1", "b1", ns)
    sink.delivered("c2", "b1", list(zip(SUB_IDS, ns, strict=True)))
    for n in ns:
        sink.record("publish", client="c1", broker="b1", nid=n.id, publisher=n.publisher,
                    seq=n.seq, published_at=n.published_at, attributes=n.attributes)
    for sub_id, n in zip(SUB_IDS, ns, strict=True):
        sink.record("deliver", client="c2", broker="b1", sub_id=sub_id, nid=n.id,
                    publisher=n.publisher, seq=n.seq, published_at=n.published_at)
    assert path.read_bytes() == b""  # nothing before its flush
    sink.close()
    lines = path.read_bytes().splitlines()
    k = len(ns)
    assert len(lines) == 4 * k
    assert [_untimed(x) for x in lines[:2 * k]] == [_untimed(x) for x in lines[2 * k:]]
    records = [json.loads(x) for x in lines]  # json: the odd values are off the schema
    assert len({r["t"] for r in records[:k]}) == 1  # one request: one moment
    assert [r["nid"] for r in records[:k]] == [n.id for n in ns]
    assert [r.get("sub_id") for r in records[k:2 * k]] == SUB_IDS
    assert records[0]["attributes"] == {"class": 0, "n": 1}
    assert records[1]["publisher"] == 'p"ü\n\x01\u2028\\' and records[1]["published_at"] is None


# what the wire gives (str publishers, int seqs, dicts of scalars), with values holding the
# separators the column encoders split at: these take the batch encoders' fast path
PLAIN_NOTIFICATIONS = [
    Notification("src", 1, {"class": 0, "n": 1}, 1764290000.123456),
    Notification("src", 2, {"t": "x,y", "u": '"}'}, float("nan")),
    Notification('p"ü\u2028', 2**64 - 1, {}, 1e16),
    Notification("src", -(2**63), {"f": -0.0, "b": False, "z": None, "e": 1e-7}, float("inf")),
    Notification("a", 7, {"x": 1.5, "é": "ü"}, -0.0),
    Notification("a", 8, {"k": "v"}, 3),
]
PLAIN_SUB_IDS = ["s.1", None, 'q"é', None, "s,1", "s.1"]


SPLIT = Notification("src", 3, {"s": "a},{b", "u": '"},{"'}, 2.5)  # "},{" inside a value
# "%" in the parts a batch's template holds (the one publisher, the one sub_id)
PERCENT = [Notification("%s%%d", i, {"%d": "%s"}, 1.5) for i in range(3)]


@pytest.mark.parametrize("ns, sub_ids, fast", [
    (PLAIN_NOTIFICATIONS, PLAIN_SUB_IDS, True),
    (PLAIN_NOTIFICATIONS[:1] * 3, ["s.1"] * 3, True),  # one publisher, one subscription
    (PLAIN_NOTIFICATIONS[1:2], [None], True),
    ([*PLAIN_NOTIFICATIONS[:2], SPLIT], ["s.1", None, "s.1"], False),
    (PERCENT, ["%d"] * 3, True),
])
def test_live_sink_batch_fast_path_gives_the_generic_bytes(
        tmp_path: Path, ns: list[Notification], sub_ids: list[str | None], fast: bool) -> None:
    """The column encoders (one orjson call per column of a batch) write exactly what `record`
    writes; a value holding the separator they split at sends the batch the general way."""
    head = b'{"v":2,"t":0,"node":"b1","kind":"publish","client":"c1","broker":"b1","nid":'
    assert (writer._publish_fast(head, ns) is not None) is fast
    assert writer._deliver_fast(head, list(zip(sub_ids, ns, strict=True))) is not None
    path = tmp_path / "b1.jsonl"
    sink = LiveSink(path, "b1", flush_interval=60)
    sink.published("c1", "b1", ns)
    sink.delivered("c2", "b1", list(zip(sub_ids, ns, strict=True)))
    for n in ns:
        sink.record("publish", client="c1", broker="b1", nid=n.id, publisher=n.publisher,
                    seq=n.seq, published_at=n.published_at, attributes=n.attributes)
    for sub_id, n in zip(sub_ids, ns, strict=True):
        sink.record("deliver", client="c2", broker="b1", sub_id=sub_id, nid=n.id,
                    publisher=n.publisher, seq=n.seq, published_at=n.published_at)
    sink.close()
    lines = path.read_bytes().splitlines()
    k = len(ns)
    assert len(lines) == 4 * k
    assert [_untimed(x) for x in lines[:2 * k]] == [_untimed(x) for x in lines[2 * k:]]
    assert [json.loads(x)["attributes"] for x in lines[:k]] == [
        json.loads(json.dumps(n.attributes)) for n in ns]


def _fresh(ns: list[Notification]) -> list[Notification]:
    return [Notification(n.publisher, n.seq, n.attributes, n.published_at) for n in ns]


@pytest.mark.parametrize("published", ["all", "none", "some"])
def test_live_sink_deliver_records_reuse_the_ids_of_the_publish_records(
        tmp_path: Path, published: str) -> None:
    """A `publish` record's ids and publication time stay on the notification
    (`trace_ids`) and its `deliver` records reuse them: the same bytes as `record` writes
    whether every notification of a write was published by this sink, none was (a link
    brought them) or some were, to one subscription or several, delivered more than once."""
    ns = _fresh([*PLAIN_NOTIFICATIONS, *PERCENT])
    assert all(n.trace_ids is None for n in ns)
    shown = {"all": ns, "none": [], "some": ns[::2]}[published]
    path = tmp_path / "b1.jsonl"
    sink = LiveSink(path, "b1", flush_interval=60)
    if shown:
        sink.published("c1", "b1", shown)
    assert all((n.trace_ids is not None) is (n in shown) for n in ns)
    one = [("s.1", n) for n in ns]
    several = list(zip(["s.1", None, "s%d"] * len(ns), ns, strict=False))
    sink.delivered("c2", "b1", one)
    sink.delivered("c3", "b1", several)
    assert all(n.trace_ids is not None for n in ns)  # a second write reuses them too
    sink.delivered("c2", "b1", one)
    for n in shown:
        sink.record("publish", client="c1", broker="b1", nid=n.id, publisher=n.publisher,
                    seq=n.seq, published_at=n.published_at, attributes=n.attributes)
    for client, deliveries in (("c2", one), ("c3", several), ("c2", one)):
        for sub_id, n in deliveries:
            sink.record("deliver", client=client, broker="b1", sub_id=sub_id, nid=n.id,
                        publisher=n.publisher, seq=n.seq, published_at=n.published_at)
    sink.close()
    lines = path.read_bytes().splitlines()
    half = len(shown) + 3 * len(ns)
    assert len(lines) == 2 * half
    assert [_untimed(x) for x in lines[:half]] == [_untimed(x) for x in lines[half:]]


def test_live_sink_started_in_a_loop_is_written_by_the_loop(tmp_path: Path) -> None:
    """`start` inside a running loop: the loop flushes the queue every flush_interval (the
    process's flusher thread no longer holds the sink) and the writer thread writes it, never
    the loop's; flush_soon and close still write."""
    path = tmp_path / "b1.jsonl"
    writers: list[str] = []

    async def run() -> None:
        sink = LiveSink(path, "b1", flush_interval=0.05)
        write = sink._write

        def spied(file: Any, data: bytes) -> None:
            writers.append(threading.current_thread().name)
            write(file, data)

        sink._write = spied  # type: ignore[method-assign]
        sink.start()
        assert sink not in writer._FLUSHER._sinks
        sink.record("start")
        deadline = time.monotonic() + 5
        while not path.read_bytes() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert [r["kind"] for r in read_trace(path)] == ["start"]
        # a sink whose period never comes: only flush_soon writes it
        slow_path = tmp_path / "b2.jsonl"
        slow = LiveSink(slow_path, "b2", flush_interval=3600.0)
        slow._write = spied  # type: ignore[method-assign]
        slow.start()
        slow.record("note")
        await asyncio.sleep(0.1)
        assert not slow_path.read_bytes()
        slow.flush_soon()
        deadline = time.monotonic() + 5
        while not slow_path.read_bytes() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert [r["kind"] for r in read_trace(slow_path)] == ["note"]
        slow.record("stop")
        await slow.aclose()
        assert [r["kind"] for r in read_trace(slow_path)] == ["note", "stop"]
        sink.record("stop")
        await sink.aclose()
        assert [r["kind"] for r in read_trace(path)] == ["start", "stop"]

    asyncio.run(run())
    assert len(writers) >= 4 and all(w.startswith("weeble-trace-writer") for w in writers)


def test_idle_sinks_on_a_loop_cost_no_flush(tmp_path: Path) -> None:
    """One ticker per loop flushes only the sinks that queued records since its last tick:
    a runner's 12,000 client sinks, each ticking on its own, cost its loop a quarter of a core
    while idle (issue 25). Here 200 sinks: after the first tick (what each queued before
    start) an idle sink is not flushed again; one that records is, and its record is written."""
    flushed: list[str] = []

    async def run() -> None:
        sinks = [LiveSink(tmp_path / f"c{i}.jsonl", f"c{i}", flush_interval=0.02)
                 for i in range(200)]
        for sink in sinks:
            flush = sink.flush

            def counted(writes: Any = None, *, flush: Any = flush,
                        node: str = sink.node) -> None:
                # the loop's flushes (the process's flusher thread may still pass once over
                # a sink created before its start, with nothing to write)
                if threading.current_thread() is threading.main_thread():
                    flushed.append(node)
                flush(writes)

            sink.flush = counted  # type: ignore[method-assign]
            sink.start()
        deadline = time.monotonic() + 5
        while len(flushed) < 200 and time.monotonic() < deadline:  # the first tick
            await asyncio.sleep(0.01)
        assert sorted(flushed) == sorted(s.node for s in sinks)
        flushed.clear()
        sinks[5].record("client_start")
        while not (tmp_path / "c5.jsonl").read_bytes() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)  # five more ticks: the idle ones stay unflushed
        assert flushed == ["c5"]
        assert [r["kind"] for r in read_trace(tmp_path / "c5.jsonl")] == ["client_start"]
        for sink in sinks:
            await sink.aclose()

    asyncio.run(run())


def test_live_sink_link_records_are_the_generic_records_byte_for_byte(tmp_path: Path) -> None:
    """`notify_sent` and `notifies_received` write what `record` writes for a Notify."""
    path = tmp_path / "b1.jsonl"
    sink = LiveSink(path, "b1", flush_interval=60)
    ns = ODD_NOTIFICATIONS
    lseqs = [1, 2**64 - 1, 3, 2**64, 5, 6, 7]
    for i, (n, lseq) in enumerate(zip(ns, lseqs, strict=True)):
        sink.notify_sent(n, lseq, 100 + i, ("b1", "b2é"), "queued" if i % 2 else "duplicated")
    sink.notifies_received(("b2é", "b1"), lseqs, ns)
    for i, (n, lseq) in enumerate(zip(ns, lseqs, strict=True)):
        sink.record("send", message_ids(Notify(n)), lseq=lseq, bytes=100 + i,
                    **{"from": "b1", "to": "b2é"}, fate="queued" if i % 2 else "duplicated")
    for n, lseq in zip(ns, lseqs, strict=True):
        sink.record("receive", message_ids(Notify(n)), lseq=lseq, **{"from": "b2é", "to": "b1"})
    sink.close()
    lines = path.read_bytes().splitlines()
    k = len(ns)
    assert len(lines) == 4 * k
    assert [_untimed(x) for x in lines[:2 * k]] == [_untimed(x) for x in lines[2 * k:]]
    assert json.loads(lines[k])["kind"] == "receive"
    assert json.loads(lines[0])["fate"] == "duplicated"


@pytest.mark.parametrize("ns, fates", [
    (PLAIN_NOTIFICATIONS, ["queued", "duplicated", "queued", "overflow", "queued", "queued"]),
    (PERCENT, ["queued"] * 3),
])
def test_live_sink_link_batch_fast_path_gives_the_generic_bytes(
        tmp_path: Path, ns: list[Notification], fates: list[str]) -> None:
    """The link records of a batch whose values are what the wire gives (one formatting for
    the batch) are what `record` writes, "%" in a node's name or a publisher included."""
    lseqs = [2**64 - 1 - i for i in range(len(ns))]
    sends = [(n, lseq, 100 + i, fate)
             for i, (n, lseq, fate) in enumerate(zip(ns, lseqs, fates, strict=True))]
    columns = ns, lseqs, [100 + i for i in range(len(ns))], fates
    head, tail = b'{"v":2,"t":0,"node":"b%1","kind":"send","nid":', b',"to":"b2","fate":'
    assert writer._send_fast(head, tail, *columns) is not None
    path = tmp_path / "b%1.jsonl"
    sink = LiveSink(path, "b%1", flush_interval=60)
    sink.notifies_sent(("b%1", "b%d"), *columns)
    sink.notifies_received(("b%d", "b%1"), lseqs, ns)
    for n, lseq, size, fate in sends:
        sink.record("send", message_ids(Notify(n)), lseq=lseq, bytes=size,
                    **{"from": "b%1", "to": "b%d"}, fate=fate)
    for n, lseq in zip(ns, lseqs, strict=True):
        sink.record("receive", message_ids(Notify(n)), lseq=lseq, **{"from": "b%d", "to": "b%1"})
    sink.close()
    lines = path.read_bytes().splitlines()
    k = len(ns)
    assert len(lines) == 4 * k
    assert [_untimed(x) for x in lines[:2 * k]] == [_untimed(x) for x in lines[2 * k:]]
    assert [json.loads(x)["fate"] for x in lines[:k]] == fates


@pytest.mark.parametrize("odd", [Notification("\ud800", 1, {"k": 1}, 1.5),
                                 Notification("src", 2**64, {"k": 1}, 1.5)])
def test_live_sink_batch_with_a_value_orjson_refuses_gives_the_generic_bytes(
        tmp_path: Path, odd: Notification) -> None:
    """A value orjson refuses (a lone surrogate, an int beyond 64 bits) in a batch of plain
    ones: no exception on the caller's path, every record the general encoder's."""
    ns = [odd, *PLAIN_NOTIFICATIONS[:2]]
    path = tmp_path / "b1.jsonl"
    sink = LiveSink(path, "b1", flush_interval=60)
    sink.published("c1", "b1", ns)
    sink.delivered("c2", "b1", [("s.1", n) for n in ns])
    sink.notifies_sent(("b1", "b2"), ns, [1] * len(ns), [10] * len(ns), ["queued"] * len(ns))
    sink.notifies_received(("b2", "b1"), [1] * len(ns), ns)
    for n in ns:
        sink.record("publish", client="c1", broker="b1", nid=n.id, publisher=n.publisher,
                    seq=n.seq, published_at=n.published_at, attributes=n.attributes)
    for n in ns:
        sink.record("deliver", client="c2", broker="b1", sub_id="s.1", nid=n.id,
                    publisher=n.publisher, seq=n.seq, published_at=n.published_at)
    for n in ns:
        sink.record("send", message_ids(Notify(n)), lseq=1, bytes=10,
                    **{"from": "b1", "to": "b2"}, fate="queued")
    for n in ns:
        sink.record("receive", message_ids(Notify(n)), lseq=1, **{"from": "b2", "to": "b1"})
    sink.close()
    lines = path.read_bytes().splitlines()
    assert len(lines) == 8 * len(ns) and sink.dropped == 0
    half = 4 * len(ns)
    untimed = [{k: v for k, v in json.loads(x).items() if k != "t"} for x in lines]
    assert untimed[:half] == untimed[half:]
    assert untimed[1]["nid"] == "src#1"
    assert ("unencodable" in untimed[0]) is (odd.seq == 1)  # else json writes the big int


def test_live_sink_cap_counts_the_records_of_a_batch(tmp_path: Path) -> None:
    path = tmp_path / "b1.jsonl"
    sink = LiveSink(path, "b1", flush_interval=60, max_bytes=2_000)
    ns = [Notification("src", i, {"class": 0}, 1.5) for i in range(100)]
    sink.published("c1", "b1", ns)
    sink.published("c1", "b1", ns[:10])
    sink.flush()
    sink.published("c1", "b1", ns[:5])  # capped already: counted only
    sink.close()
    records = list(read_trace(path))
    assert records[-1]["kind"] == "trace_capped" and records[-1]["written"] <= 2_000
    written = len(records) - 1
    assert written > 0 and written + sink.dropped == 115
    assert [r["seq"] for r in records[:-1]] == list(range(written))


def test_live_sink_reopening_cuts_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "b1.jsonl"
    path.write_text('{"v":2,"t":1,"node":"b1","kind":"a"}\n{"v":2,"ki')  # a killed writer
    sink = LiveSink(path, "b1")
    sink.record("start")
    sink.close()
    assert [r["kind"] for r in read_trace(path)] == ["a", "start"]


def test_sim_sink_hand_formatted_deliver_is_the_generic_record(tmp_path: Path) -> None:
    sink = SimSink(tmp_path)
    n = Notification('p"1', 3, {"class": 3.0}, 1.25)
    sink.deliver(2.5, "b1", "cé", "cé/0", n)
    sink.write("b1", 2.5, "b1", "deliver", {"client": "cé", "broker": "b1", "sub_id": "cé/0",
                                            "nid": n.id, "publisher": n.publisher, "seq": 3,
                                            "published_at": 1.25})
    sink.deliver(3.0, "b1", "c2", None, n)
    sink.close()
    fast, generic, no_sub = (tmp_path / "trace" / "b1.jsonl").read_text().splitlines()
    assert fast == generic  # byte for byte
    assert "sub_id" not in json.loads(no_sub)


def unknown_fields(records: list[dict[str, Any]]) -> set[str]:
    """`kind.field` of every field a writer wrote that the schema does not list."""
    out = set()
    for r in records:
        kind = schema.KINDS.get(r["kind"])
        if kind is None:
            out.add(f"{r['kind']} (kind)")
            continue
        out |= {f"{r['kind']}.{f}" for f in r if f not in schema.HEADER and f not in kind.fields}
    return out


def test_simulator_writes_only_schema_kinds_and_fields(tmp_path: Path) -> None:
    """No silent drop: every record the simulator writes (faults, sends, snapshots, chaos
    included) is of a kind of the schema and carries only its fields."""
    from weeble.chaos.runner import in_simulation
    from weeble.model.scenario import load_scenario, parse_scenario
    from weeble.sim.run import simulate

    root = Path(__file__).resolve().parents[2] / "scenarios"
    small = load_scenario(root / "sim-small.yaml")
    short = small.model_copy(update={
        "duration": 40.0, "trace": small.trace.model_copy(update={
            "sends": True, "snapshots_every": 10.0})})
    simulate(short, tmp_path / "a", progress=False, faults=in_simulation(short))
    run = read_run(tmp_path / "a")
    assert unknown_fields(run.records) == set()
    kinds = {r["kind"] for r in run.records}
    assert {"run", "run_end", "publish", "deliver", "subscribe", "refresh", "send", "receive",
            "legitimacy", "snapshot"} <= kinds
    delivered = [r for r in run.records if r["kind"] == "deliver"]
    assert delivered and all(r["node"] == r["broker"] and r.get("sub_id") for r in delivered)

    from tests.chaos.test_sim import EVERY_KIND, QUICKSTART

    spec = {**QUICKSTART, "duration": 30, "chaos": {"faults": EVERY_KIND},
            "trace": {"sends": True, "snapshots_every": 5.0}}
    with_chaos = parse_scenario(spec)
    simulate(with_chaos, tmp_path / "b", progress=False, faults=in_simulation(with_chaos))
    chaos = read_run(tmp_path / "b")
    assert unknown_fields(chaos.records) == set()
    begun = {r["fault_id"] for r in chaos.records if r["kind"] == "fault_begin"}
    assert begun == {f["name"] for f in EVERY_KIND}
