"""Bad input: a clear error naming the file (and version, line, field), never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.analytics import handmade
from weeble.analytics import schema
from weeble.analytics.schema import (
    RunDirError,
    TraceFormatError,
    TraceVersionError,
    load_meta,
    read_trace,
)
from weeble.cli import main


def _lines(path: Path, *records: dict[str, Any], tail: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)
    return path


def _run(tmp_path: Path, *records: dict[str, Any], tail: str = "") -> Path:
    run = tmp_path / "run"
    _lines(run / "trace" / "b1.jsonl", *records, tail=tail)
    (run / "summary.json").write_text(json.dumps({
        "scenario": "bad", "duration": 10.0, "params": handmade.PARAMS,
        "routing": {"algorithm": "identity", "hierarchical": True, "wrapper": False}}))
    return run


GOOD = handmade.rec(1, "c1", "subscribe", broker="b1", sub_id="c1/0", filter="class == 1")


# ---- the reference reader (no Spark) ----------------------------------------------------------


def test_reader_skips_a_torn_last_line(tmp_path: Path) -> None:
    path = _lines(tmp_path / "b1.jsonl", GOOD, GOOD, tail='{"v":1,"t":5,"no')
    assert len(list(read_trace(path))) == 2


def test_reader_keeps_a_complete_last_line_without_newline(tmp_path: Path) -> None:
    path = _lines(tmp_path / "b1.jsonl", GOOD, tail=json.dumps(GOOD))
    assert len(list(read_trace(path))) == 2


def test_reader_names_file_and_line_of_a_bad_line_in_the_middle(tmp_path: Path) -> None:
    path = tmp_path / "b1.jsonl"
    path.write_text(json.dumps(GOOD) + "\n{oops\n" + json.dumps(GOOD) + "\n")
    with pytest.raises(TraceFormatError, match=r"b1\.jsonl:2: not a JSON record"):
        list(read_trace(path))


def test_reader_rejects_an_unknown_version_naming_file_and_version(tmp_path: Path) -> None:
    path = _lines(tmp_path / "b1.jsonl", GOOD, {**GOOD, "v": 2})
    with pytest.raises(TraceVersionError, match=r"b1\.jsonl:2: trace schema version 2; "
                                                r"this weeble reads version 1"):
        list(read_trace(path))


def test_reader_checks_fields_and_applies_aliases(tmp_path: Path) -> None:
    sim_style = handmade.sim_deliver(2, "c1", "p1", 1)
    (rec,) = read_trace(_lines(tmp_path / "a.jsonl", sim_style))
    assert (rec["client"], rec["broker"], rec["nid"]) == ("c1", "b1", "p1#1")
    no_seq = {k: v for k, v in sim_style.items() if k != "seq"}
    with pytest.raises(TraceFormatError, match="deliver record lacks field 'seq'"):
        list(read_trace(_lines(tmp_path / "b.jsonl", no_seq)))
    with pytest.raises(TraceFormatError, match=r"deliver\.seq is not int"):
        list(read_trace(_lines(tmp_path / "c.jsonl", {**sim_style, "seq": "one"})))


def test_every_field_has_one_type_across_kinds() -> None:
    fields = schema.all_fields()  # raises on a conflict
    assert fields["seq"] is schema.Type.INT and fields["attributes"] is schema.Type.JSON


def test_simulator_trace_is_valid_v1(tmp_path: Path) -> None:
    """Every record the simulator writes reads back under the schema (aliases applied)."""
    from weeble.broker.sim.run import simulate
    from weeble.model.scenario import load_scenario

    scenario = load_scenario(Path(__file__).parents[2] / "scenarios" / "sim-small.yaml")
    short = scenario.model_copy(update={"duration": 20.0, "faults": scenario.faults[:0]})
    simulate(short, tmp_path, progress=False)
    kinds = set()
    for path in (tmp_path / "trace").glob("*.jsonl"):
        kinds |= {rec["kind"] for rec in read_trace(path)}
    assert {"publish", "deliver", "subscribe", "legitimacy"} <= kinds <= set(schema.KINDS)


# ---- run directory and metadata ---------------------------------------------------------------


def test_missing_run_directory_exits_2_without_traceback(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture) -> None:
    assert main(["analyze", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"weeble: error: {tmp_path / 'nope'}: no such run directory"


def test_run_without_traces_or_metadata(tmp_path: Path) -> None:
    (tmp_path / "trace").mkdir()
    with pytest.raises(RunDirError, match="no trace files"):
        schema.trace_files(tmp_path)
    with pytest.raises(RunDirError, match=r"neither run\.json nor summary\.json"):
        load_meta(tmp_path)


def test_live_run_json_contract(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps(schema.RUN_JSON_EXAMPLE))
    meta = load_meta(tmp_path)
    assert meta.source == "live" and meta.t0_ns == schema.RUN_JSON_EXAMPLE["t0_ns"]
    assert meta.bound == pytest.approx(2 * 20.1 + 4 * 0.025)
    (tmp_path / "run.json").write_text(json.dumps({**schema.RUN_JSON_EXAMPLE, "v": 9}))
    with pytest.raises(RunDirError, match=r"run\.json version 9"):
        load_meta(tmp_path)


# ---- through the Spark ingest -----------------------------------------------------------------


def test_unknown_version_on_the_first_line_fails_before_spark(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run = _run(tmp_path, {**GOOD, "v": 7})
    assert main(["analyze", str(run)]) == 2
    err = capsys.readouterr().err
    assert "b1.jsonl:1: trace schema version 7; this weeble reads version 1" in err
    assert "Traceback" not in err


def test_unknown_version_inside_a_file(spark: Any, tmp_path: Path) -> None:
    from weeble.analytics.pipeline import analyze

    run = _run(tmp_path, GOOD, {**GOOD, "t": 2 * handmade.NS, "v": 2})
    with pytest.raises(TraceVersionError, match=r"b1\.jsonl: trace schema version 2"):
        analyze(run, spark=spark)


def test_bad_line_inside_a_file(spark: Any, tmp_path: Path) -> None:
    from weeble.analytics.pipeline import analyze

    run = _run(tmp_path, GOOD, tail="{oops\n" + json.dumps(GOOD) + "\n")
    with pytest.raises(TraceFormatError, match=r"b1\.jsonl:2: not a JSON record"):
        analyze(run, spark=spark)


def test_missing_required_field(spark: Any, tmp_path: Path) -> None:
    from weeble.analytics.pipeline import analyze

    no_filter = {k: v for k, v in GOOD.items() if k != "filter"}
    run = _run(tmp_path, GOOD, no_filter)
    with pytest.raises(TraceFormatError,
                       match=r"b1\.jsonl: 1 subscribe record\(s\) lack required field 'filter'"):
        analyze(run, spark=spark)
