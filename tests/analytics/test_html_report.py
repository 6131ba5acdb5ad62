"""report.html in a real browser: a simulated run with faults, reconfigurations, send records
and snapshots is analyzed, its page rendered by headless Chromium (Debian's `chromium`, which
scripts/setup.sh installs), and the rendered DOM and a screenshot are checked."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from weeble.analytics.html import SECTIONS, reproduce_commands
from weeble.cli import main

DATA = Path(__file__).parent / "data"

# Offline and quiet: no network service of the browser may start (the page needs none).
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync")


def chromium(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("chromium")
    if exe is None:
        pytest.fail("no `chromium` on PATH: scripts/setup.sh installs it (apt-get install "
                    "chromium)")
    return subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args,
                           page.as_uri()], capture_output=True, text=True, timeout=180,
                          check=True)


@pytest.fixture(scope="module")
def analyzed(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    from weeble.analytics.pipeline import analyze

    run = tmp_path_factory.mktemp("report") / "report-run"
    assert main(["simulate", str(DATA / "report-run.yaml"), "--out", str(run), "--quiet"]) == 0
    return run, analyze(run, spark=spark)


def test_the_page_renders_every_section_without_a_script_error(
        analyzed: tuple[Path, dict], tmp_path: Path) -> None:
    run, summary = analyzed
    page = run / "analysis" / "report.html"
    text = page.read_text()
    # self-contained: nothing is fetched (the only URL is the SVG namespace, an identifier)
    assert re.findall(r"https?://[^\s\"']+", text) == ["http://www.w3.org/2000/svg"]
    assert not re.search(r"<(link|img|iframe)\b|\bsrc=", text)

    dom = chromium(page, tmp_path / "profile-dom", "--dump-dom").stdout
    body = re.search(r"<body[^>]*>", dom)
    assert body is not None
    assert 'data-rendered="yes"' in body.group(0), body.group(0)
    assert 'data-errors=""' in body.group(0), body.group(0)
    for section in SECTIONS:
        assert f'id="{section}"' in dom, section
    timeline = dom[dom.index('id="timeline-chart"'):dom.index('id="episodes"')]
    # the three panels, each with the two faults shaded and the three reconfigurations banded
    assert timeline.count('class="panel ') == 3
    assert timeline.count('class="band fault"') == 3 * len(summary["faults"]) == 6
    assert timeline.count('class="band reconfiguration"') == 3 * 3
    assert 'class="bar lost"' in timeline  # the faults lost publications, as the table says
    assert sum(f["lost"] for f in summary["faults"]) > 0
    assert 'class="line ' in timeline
    brokers = dom[dom.index('id="brokers-chart"'):dom.index('id="latency"')]
    assert 'class="heat entries"' in brokers and 'class="heat sent"' in brokers
    assert dom.count('class="stabilization"') == 2  # one per episode
    assert 'class="panel latency"' in dom
    # the episodes name the evidence that each fault took effect
    assert "applied (fault_end ok)" in dom and "drop records" in dom
    for command in reproduce_commands(summary):
        assert command in dom

    shot = tmp_path / "report.png"
    chromium(page, tmp_path / "profile-shot", "--window-size=1280,4000",
             f"--screenshot={shot}", "--hide-scrollbars")
    from PIL import Image

    with Image.open(shot) as image:
        assert image.size == (1280, 4000)
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50  # charts, not a blank or error page


def test_the_text_twin_and_the_plots(analyzed: tuple[Path, dict]) -> None:
    run, summary = analyzed
    md = (run / "analysis" / "report.md").read_text()
    o = summary["ordering"]
    assert o["subscribers"] > 0 and o["deliveries"] > 0
    # it says what was checked, not "0 (0 subscribers)"
    assert (f"Per-publisher FIFO violations in {o['deliveries']:,} first deliveries to "
            f"{o['subscribers']:,} subscribers: 0.") in md
    for png in ("correctness.png", "stabilization.png", "reconfigurations.png", "latency.png",
                "overhead.png"):
        assert (run / "analysis" / png).exists(), png
    assert summary["report"].endswith("report.md")
    # the run can be run again from what its directory keeps
    again = json.loads((run / "scenario.json").read_text())
    assert again["name"] == "report-run"


def test_latency_is_on_a_log_scale_and_lost_bars_are_not_clipped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    import matplotlib

    from weeble.analytics import report

    matplotlib.use("Agg")
    figures: dict[str, Any] = {}

    def keep(fig: Any, path: Path) -> str:
        figures[path.name] = fig
        return path.name

    monkeypatch.setattr(report, "_save", keep)
    ctx = types.SimpleNamespace(bin=1.0, out=tmp_path)
    series = {
        "latency": [{"bin": float(b), "deliveries": 10, "p50": 0.002, "p90": 0.005,
                     "p99": 0.05, "p999": 0.4, "max": 2.0} for b in range(10)],
        "publications": [{"bin": float(b), "published": 5, "judged": 5, "correct": 0.5,
                          "expected": 50, "delivered": 50 - 3 * b, "missing": 3 * b,
                          "duplicate": 2 if b == 9 else 0} for b in range(10)],
    }
    summary = {"run": {"end": 10.0}, "faults": [],
               "reconfigurations": {"operations": [
                   {"rid": "r1", "start": 2.0, "end": 3.0, "verdict": "pass"}]}}
    report._latency_plot(ctx, series)  # type: ignore[arg-type]
    (latency,) = figures["latency.png"].axes
    assert latency.get_yscale() == "log"
    assert {t.get_text() for t in latency.get_legend().get_texts()} >= {"p50", "p99", "max"}
    report._reconfigurations_plot(ctx, summary, series)  # type: ignore[arg-type]
    _, losses = figures["reconfigurations.png"].axes
    assert losses.get_ylim()[1] >= 27 + 2  # the tallest stack: 27 lost + 2 duplicated
