"""The command line: every command says what it does; `weeble status` skips runs that failed."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from tests.runtime.livebed import scenario
from weeble.cli import COMMANDS, build_parser, main
from weeble.orchestrator.testbed import Testbed


def subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_says_what_it_does(command: str) -> None:
    p = subparsers()[command]
    assert p.description and len(p.description) > 60, command
    help_line = next(c.help for a in build_parser()._actions
                     if isinstance(a, argparse._SubParsersAction)
                     for c in a._choices_actions if c.dest == command)
    assert help_line, command


def test_run_help_says_it_runs_chaos_and_the_analysis(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for words in ("chaos experiment", "analyze them", "verdict per fault", "--chaos FILE",
                  "Exit status: the verdict's (0 pass, 1 fail"):
        assert words in text, words


def test_simulate_help_names_the_faults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "chaos experiment" in text and "--chaos FILE" in text


def _run(runs: Path, run_id: str, *, state: str, configs: bool) -> Testbed:
    bed = Testbed.plan(scenario(topology={"kind": "chain", "brokers": 2}), runs_dir=runs,
                       run_id=run_id, any_ports=True)
    if configs:  # what starting the brokers writes
        for b, config in bed.configs.items():
            config.dump(bed.backend.config_path(b))
    bed.state = state
    bed.save_state()
    bed.backend.close()
    return bed


def test_status_skips_runs_that_failed_and_says_so(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    _run(runs, "a-good", state="down", configs=True)
    _run(runs, "b-nothing", state="starting", configs=False)  # killed while starting
    _run(runs, "c-failed", state="failed", configs=False)  # the newest
    assert main(["status", "--runs-dir", str(runs), "--json"]) == 0
    out, err = capsys.readouterr()
    shown = json.loads(out)
    assert shown["run_id"] == "a-good" and [b["broker"] for b in shown["brokers"]] == [
        "b0", "b1"]
    assert "weeble: skipped run c-failed: it failed to start" in err
    assert "weeble: skipped run b-nothing:" in err and "config file" in err
    assert [s["run_id"] for s in shown["skipped"]] == ["c-failed", "b-nothing"]
    # named explicitly, a failed run is still an error that says what is wrong
    assert main(["status", "c-failed", "--runs-dir", str(runs)]) == 2
    assert "config file" in capsys.readouterr().err


def test_status_with_only_failed_runs_says_so(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    _run(runs, "failed", state="failed", configs=False)
    assert main(["status", "--runs-dir", str(runs)]) == 2
    err = capsys.readouterr().err
    assert "no run in" in err and "that started (skipped run failed: it failed to start)" in err
