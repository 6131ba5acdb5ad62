"""`weeble reproduce skipring` and `sketches` on tiny grids (the short grids take a minute or
two), and `weeble reproduce all`'s index. What the tiny runs must show is what holds at any size:
SR(n) by joins is SR(n) by definition with 2n − 3 edges, flooding costs 3n − 5 messages, a
newcomer gets the history in 3, the busiest member receives Θ(log n); the repaired Theorem 3
gives the spec's numbers and Monte Carlo agrees; a legal anti-entropy system sends exactly an
Observe and a reply per edge and period; and a rerun resumes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from weeble.analytics.reproduce.framework import run
from weeble.analytics.reproduce.sketches import Setup as SketchSetup
from weeble.analytics.reproduce.sketches import Sketches, model_only
from weeble.analytics.reproduce.skipring import ModelColumn, SkipRing
from weeble.cli import main


def tiny_skipring(**kw: object) -> SkipRing:
    return SkipRing(join_sizes=((16, 100), ()), load_sizes=((16, 64), ()),  # type: ignore[arg-type]
                    corrupted_sizes=((16,), ()), seeds=(1, 1), flood_sizes=((64,), ()),
                    newcomer_sizes=(10, 200), closure_size=20, ratio_size=16,
                    ratio_seeds=(1, 1), **kw)


def test_skipring_tiny_grid_meets_every_claim_and_resumes(tmp_path: Path) -> None:
    result = run(tiny_skipring(), out=tmp_path)
    by_id = {o.claim.id: o for o in result.outcomes}
    sim = {i: o.values["simulation"] for i, o in by_id.items()}
    assert all(v is not None for v in sim.values()), sim
    assert sim["C.1-3a"] == 0 and sim["C.1-3f"] == 0  # 2n − 3 edges; diameters 4 and 6
    assert sim["C.1-2"] == 1.0  # the stored edges are SR(n) by definition
    assert sim["C.1-13"] == 3 and sim["C.1-14b"] == 0  # newcomer in 3 messages; 3n − 5
    assert by_id["C.1-3a"].values["model"] == 0  # the definition has 2n − 3 edges too
    assert sim["C.1-6a"] == 1 and sim["C.1-6b"] == 2  # supervisor messages per operation
    # the abstract's "constant for any process" fails by what labels 0 and 1 receive (the
    # spec's caveat, C.1-8c): about 2 more messages per interval per doubling of n
    assert sim["C.1-8e"] > 1 and not by_id["C.1-8e"].met and by_id["C.1-8c"].met
    assert [o.claim.id for o in result.outcomes if not o.met] == ["C.1-8e"]
    report = result.report.read_text()
    assert "## Per size" in report and "From a corrupted state" in report
    assert [p.name for p, _ in result.figures] == [
        "seed003_degree_diameter_vs_n.png", "seed003_load_vs_n_supervisor0.25.png",
        "seed003_convergence_vs_n_supervisor0.25.png",
        "seed003_convergence_vs_supervisor_timeout_n16.png"]
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p, _ in result.figures)
    again = run(tiny_skipring(), out=tmp_path)
    assert again.evaluated == 0 and again.reused == result.evaluated
    assert [o.values for o in again.outcomes] == [o.values for o in result.outcomes]


def test_sketches_tiny_grid_reads_every_claim_from_its_runs(tmp_path: Path) -> None:
    experiment = Sketches(setup=SketchSetup(brokers=12), filters=(20, 20),
                          converge_sizes=((6,), ()), converge_seeds=(1, 1),
                          diameter_sizes=((6,), ()), diameter_seeds=(1, 1),
                          overhead_seeds=(1, 1), downtimes=((3.0,), ()))
    result = run(experiment, out=tmp_path)
    by_id = {o.claim.id: o for o in result.outcomes}
    sim = {i: o.values["simulation"] for i, o in by_id.items()}
    assert all(v is not None for v in sim.values()), sim
    model = {i: o.values["model"] for i, o in by_id.items()}
    # the repaired Theorem 3 gives the spec's numbers; the printed one rises with m/n
    assert model["C.2-4 p(4,2,1)"] == pytest.approx(0.155, rel=0.01)
    assert model["C.2-4 p(8,2,3)"] == pytest.approx(1.18e-4, rel=0.01)
    assert sim["C.2-4 p(4,2,1)"] == pytest.approx(0.155, rel=0.1)  # Monte Carlo, 20 filters
    assert model["C.2-4 trend"] == sim["C.2-4 trend"] == 1.0
    assert by_id["C.2-5"].met and model["C.2-5"] == 64
    assert sim["C.2-3a"] == pytest.approx(2.0, abs=0.1) and sim["C.2-3b"] == 0
    assert sim["C.2-2a"] == 1.0  # legal again within Δ, path and star
    assert {"C.2-6a", "C.2-6f", "C.2-2b"} <= set(sim)  # read from the runs, met or not
    # an unwanted event crossed at least the hop into the broker where it died (seed 002 L207
    # counts the hops); the faults of C.2-2b's runs hit only broker-to-broker entries, which the
    # rounds repair, well before the leases could (2π = 6 s)
    runs = [json.loads(f.read_text())["columns"]["simulation"]["values"]
            for f in (tmp_path / "points").glob("part=4_*.json")]
    assert runs and all(r["unwanted_hops"] >= r["unwanted"] for r in runs)
    edges = [json.loads(f.read_text())["columns"]["simulation"]["values"]
             for f in (tmp_path / "points").glob("part=3_*_faults=1.json")]
    assert len(edges) == 2 and all(0 < r["took"] < 3.0 and r["closed"] == 1 for r in edges)
    report = result.report.read_text()
    assert "Theorem 3 repaired | as printed | Monte Carlo" in report
    assert "## §5: reconfiguration overhead per strategy" in report
    assert "## Time to legality against the diameter" in report
    assert [p.name for p, _ in result.figures] == [
        "seed002_false_positive_vs_difference_k2.png", "seed002_overhead_by_timer_n12.png",
        "seed002_convergence_vs_diameter.png"]
    points = {p.name for p in (tmp_path / "points").glob("*.json")}
    assert "part=4_load=1_strategy=4_seed=1_downtime=3.json" in points  # the baseline run
    # the benchmark reads a finished run's figures back without re-running it
    bench = Path(__file__).resolve().parents[2] / "benchmarks" / "reproduce_ch3.py"
    line = subprocess.run([sys.executable, str(bench), "--recorded", str(tmp_path)], check=True,
                          capture_output=True, text=True).stdout
    wall = sum(json.loads(f.read_text())["columns"]["simulation"]["values"]["wall_s"]
               for f in (tmp_path / "points").glob("*.json"))
    assert f"{len(points)} points, {len(points)} simulated, {wall:,.0f} s" in line


def test_all_writes_one_index_and_model_only_keeps_what_has_a_model(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["reproduce", "all", "--out", str(tmp_path), "--model-only", "--quiet"])
    index = (tmp_path / "index.md").read_text()
    assert status == 0
    for name in ("ch3", "sketches", "skipring"):
        assert f"[{name}/report.md]({name}/report.md)" in index
        claims = json.loads((tmp_path / name / "claims.json").read_text())
        assert claims and all(set(c["values"]) == {"model"} for c in claims)
    assert "| ch4 | left out: ch4 has a simulation column only" in index
    assert "| ch5 | left out:" in index
    # a figure needs its column: model-only draws what the model gives, nothing empty
    assert "seed002_convergence_vs_diameter.png" not in index
    assert "seed003_degree_diameter_vs_n.png" in index
    # without the simulation column only the claims with a closed form are judged
    skipring = {c["id"] for c in json.loads((tmp_path / "skipring" / "claims.json").read_text())}
    assert "C.1-3a" in skipring and "C.1-9a" not in skipring
    assert [e.name for e in SkipRing(evaluators=(ModelColumn(),)).evaluators] == ["model"]
    assert [e.name for e in model_only().evaluators] == ["model"]


def test_wasted_hops_count_every_hop_no_receiver_needed() -> None:
    """Seed 002 §5 (L207) counts the hops an unwanted event traversed: a hop is wasted when no
    broker at or beyond its receiver delivered the event, whatever branch it was on."""
    from weeble.analytics.reproduce.sketches import WastedHops
    from weeble.core.messages import Notification, Notify

    def note(publisher: str, seq: int) -> Notify:
        return Notify(Notification(publisher=publisher, seq=seq, attributes={"p": "abc"}))

    w = WastedHops()
    first = note("a", 1)
    # a → b → c → d, and b → e: only e delivers; b → c → d is a dead branch of 2 hops
    for src, dst in (("a", "b"), ("b", "c"), ("b", "e"), ("c", "d")):
        w.on_link("receive", src, dst, first)
    w.on_deliver(0.0, "e", "client-e", first.notification)
    second = note("a", 2)  # nobody wants it: both hops are wasted
    for src, dst in (("a", "b"), ("b", "c")):
        w.on_link("receive", src, dst, second)
        w.on_link("send", src, dst, second)  # a send is not a traversed hop
    w.on_deliver(0.0, "d", "client-d", first.notification)  # now d wanted the first after all
    assert w.wasted() == 2  # the second's two hops; the first reached e and d
    w.delivered.clear()
    assert w.wasted() == 6
