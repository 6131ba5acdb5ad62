"""Trace writer and reader: batching, flush on close, a torn last line is tolerated."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from weeble.broker.runtime.trace import TraceFormatError, TraceWriter, read_trace


def test_records_carry_header_and_survive_close(tmp_path: Path) -> None:
    path = tmp_path / "b1.jsonl"
    writer = TraceWriter(path, "b1", max_buffer=1000)
    writer.record("publish", {"kind": "clash", "nid": "p#1"}, seq=1)
    assert path.read_text() == ""  # batched: nothing written yet
    writer.close()
    (rec,) = list(read_trace(path))
    assert rec["v"] == 1 and rec["node"] == "b1" and rec["kind"] == "publish"
    assert isinstance(rec["t"], int) and rec["nid"] == "p#1" and rec["seq"] == 1
    assert rec["_kind"] == "clash"  # a field never overwrites the header


def test_periodic_flush(tmp_path: Path) -> None:
    path = tmp_path / "b1.jsonl"

    async def scenario() -> None:
        writer = TraceWriter(path, "b1", flush_interval=0.05)
        writer.start()
        writer.record("start")
        await asyncio.sleep(0.3)
        assert len(list(read_trace(path))) == 1  # flushed without close
        await writer.aclose()

    asyncio.run(scenario())


def test_reader_tolerates_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "b1.jsonl"
    good = [{"v": 1, "t": i, "node": "b1", "kind": "send", "i": i} for i in range(3)]
    text = "".join(json.dumps(r) + "\n" for r in good)
    path.write_text(text + '{"v":1,"t":9,"node":"b1","ki')
    assert list(read_trace(path)) == good
    path.write_text(text + '{"v":1,"t":9,"node":"b1","kind":"x"}')  # complete but no newline
    assert len(list(read_trace(path))) == 4
    path.write_bytes(text.encode() + '{"v":1,"t":9,"s":"é'.encode()[:-1])  # cut in a character
    assert list(read_trace(path)) == good


def test_reader_rejects_a_bad_middle_line(tmp_path: Path) -> None:
    path = tmp_path / "b1.jsonl"
    path.write_text('{"v":1}\nnot json\n{"v":1}\n')
    with pytest.raises(TraceFormatError, match=":2:"):
        list(read_trace(path))


def test_writer_reopening_cuts_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "b1.jsonl"
    path.write_text('{"v":1,"kind":"a"}\n{"v":1,"ki')  # a killed writer left this
    writer = TraceWriter(path, "b1")
    writer.record("start")
    writer.close()
    assert [r["kind"] for r in read_trace(path)] == ["a", "start"]
