"""Bad input: a clear error naming the file (and version, line, field), never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.analytics import handmade
from weeble.cli import main
from weeble.trace.reader import TraceFormatError, TraceVersionError


def _lines(path: Path, *records: dict[str, Any], tail: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)
    return path


def _run(tmp_path: Path, *records: dict[str, Any], tail: str = "") -> Path:
    run = tmp_path / "run"
    _lines(run / "trace" / "b1.jsonl", *records, tail=tail)
    _lines(run / "trace" / "run.jsonl", handmade.header())
    return run


GOOD = handmade.rec(1, "b1", "subscribe", client="c1", broker="b1", sub_id="c1/0",
                    filter="class == 1")


# ---- run directory and header (no Spark) -----------------------------------------------------


def test_missing_run_directory_exits_2_without_traceback(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture) -> None:
    assert main(["analyze", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"weeble: error: {tmp_path / 'nope'}: no such run directory"


def test_run_without_header_exits_2_naming_it(tmp_path: Path,
                                              capsys: pytest.CaptureFixture) -> None:
    _lines(tmp_path / "trace" / "b1.jsonl", GOOD)
    assert main(["analyze", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no run header (trace/run.jsonl)" in err and "Traceback" not in err


# ---- through the Spark ingest -----------------------------------------------------------------


def test_unknown_version_on_the_first_line_fails_before_spark(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run = _run(tmp_path, {**GOOD, "v": 7})
    assert main(["analyze", str(run)]) == 2
    err = capsys.readouterr().err
    assert "b1.jsonl:1: trace schema version 7; this weeble reads version 2" in err
    assert "Traceback" not in err


def test_unknown_version_inside_a_file(spark: Any, tmp_path: Path) -> None:
    from weeble.analytics.pipeline import analyze

    run = _run(tmp_path, GOOD, {**GOOD, "t": 2 * handmade.NS, "v": 3})
    with pytest.raises(TraceVersionError, match=r"b1\.jsonl: trace schema version 3"):
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


def test_no_java_is_said_before_the_ingest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ingest runs while Spark starts: a missing Java is named first, not after minutes."""
    from weeble.analytics import spark as spark_module
    from weeble.analytics.errors import AnalyticsError
    from weeble.analytics.pipeline import analyze

    run = _run(tmp_path, GOOD)
    monkeypatch.setattr(spark_module.shutil, "which", lambda _: None)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(AnalyticsError, match="Java not found"):
        analyze(run)
    assert not (run / "analysis" / "events").exists()
