"""`weeble reproduce`: the ch3 run end to end, resuming, bad input, and a second column.

The second column here is the generalized recursion of §3.5.4 evaluated on the same grid points:
a real, independent computation that exercises the path the simulation column will take (claims
read from grid points and curves, markers in the figures, a column per evaluator in the table).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from weeble.analytics.costmodel import Tree, general, uniform_leaf_classes
from weeble.analytics.reproduce import ch3
from weeble.analytics.reproduce.framework import Point, ReproduceError, Tolerance, run
from weeble.cli import main


def model_only() -> ch3.Chapter3:
    """ch3 without its simulation column (tests/analytics/test_reproduce_sim.py runs that one)."""
    return ch3.Chapter3(evaluators=(ch3.ClosedFormColumn(),))


def claims(out: Path) -> list[dict]:
    return json.loads((out / "claims.json").read_text())


def test_ch3_reproduces_every_claim_and_writes_the_figures(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reproduce", "ch3", "--out", str(tmp_path), "--model-only"]) == 0
    printed, progress = capsys.readouterr()
    lines = progress.splitlines()  # piped: at most a line a twentieth of the grid, and the last
    assert 1 <= len(lines) <= 21 and lines[-1].startswith("reproduce ch3: 136/136 evaluations, ")
    result = claims(tmp_path)
    assert result and all(c["met"] for c in result)
    assert all(set(c["values"]) == {"model"} for c in result)  # --model-only
    by_id = {c["id"]: c for c in result}
    assert round(by_id["break-even/b_leaf/1000/600/60"]["values"]["model"]) == 299_172
    assert round(by_id["break-even/b_root/1000/600/60"]["values"]["model"]) == 300_170
    assert {c["group"] for c in result} == {ch3.THESIS, ch3.BREAK_EVEN, ch3.TABLE}
    assert len([c for c in result if c["group"] == ch3.BREAK_EVEN]) == 16
    report = (tmp_path / "report.md").read_text()
    assert "(3.53)" in report and "(3.49), (3.57)" in report  # the errata applied
    for name in ("fig3_2.png", "fig3_3.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"({name})" in report
    # the short grid: 8 scenarios × the N̄ values, one result file each
    points = list((tmp_path / "points").glob("*.json"))
    assert len(points) == 8 * len(model_only().n_values(full=False))
    assert "claims met" in printed and "model − paper" in printed


def test_a_rerun_resumes_and_a_full_run_adds_only_its_new_points(tmp_path: Path) -> None:
    experiment = model_only()
    first = run(experiment, out=tmp_path, full=False)
    short = 8 * len(experiment.n_values(full=False))
    assert (first.evaluated, first.reused) == (short, 0)
    again = run(experiment, out=tmp_path, full=False)
    assert (again.evaluated, again.reused) == (0, short)
    # a lost point is recomputed, alone
    next(iter((tmp_path / "points").glob("*.json"))).unlink()
    assert run(experiment, out=tmp_path, full=False).evaluated == 1
    full = run(experiment, out=tmp_path, full=True)
    assert full.reused == short
    assert full.evaluated == 8 * len(experiment.n_values(full=True)) - short
    assert full.met


def test_a_new_evaluator_version_recomputes(tmp_path: Path) -> None:
    run(model_only(), out=tmp_path)
    newer = ch3.Chapter3(evaluators=(ch3.ClosedFormColumn(version="v2"),))
    assert run(newer, out=tmp_path).reused == 0


def test_a_corrupt_point_file_is_an_error_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(model_only(), out=tmp_path)
    victim = tmp_path / "points" / f"{ch3.point(1000, 600, 60, 0).key}.json"
    victim.write_text("{not json")
    with pytest.raises(ReproduceError, match="unreadable point result"):
        run(model_only(), out=tmp_path)
    assert main(["reproduce", "ch3", "--out", str(tmp_path), "--quiet", "--model-only"]) == 2
    assert victim.name in capsys.readouterr().err
    victim.write_text(json.dumps({"point": {"omega": 1.0}, "columns": {}}))
    with pytest.raises(ReproduceError, match="another point"):
        run(model_only(), out=tmp_path)


def test_unknown_experiment_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["reproduce", "ch9", "--out", "/nonexistent"])
    assert exit_.value.code == 2
    assert "invalid choice: 'ch9'" in capsys.readouterr().err


TREE = Tree.complete(ch3.TREE)


@dataclass(frozen=True)
class RecursionColumn:
    """The §3.5.4 recursion on the explicit 121-broker tree, as a second column."""

    name: str = "recursion"
    version: str = "1"
    tree: Tree = TREE

    def applies_to(self, point: Point, *, full: bool) -> bool:
        return point["n"] <= 500_000 or point["n"] == 1_000_000  # like a simulator's limit

    def evaluate(self, point: Point) -> dict[str, float]:
        out = {}
        for publishers in ("leaves", "root"):
            classes = uniform_leaf_classes(
                tree=self.tree, z=ch3.Z, n_subscriptions=point["n"], omega=point["omega"],
                mu=1 / point["mu_inv"], publishers=publishers)
            out[publishers] = general(tree=self.tree, rho=point["rho"], classes=classes)
        g, r = out["leaves"], out["root"]
        m_o = sum(g.toggles[b] for b in self.tree.leaves)
        values = {"x": g.x, "b_f": g.b_f, "b_s": g.b_s, "b_p": g.b_p, "saved_leaf": g.b_s - g.b_p,
                  "b_l": g.b_l, "b_o": g.b_o, "b_c": g.b_c, "m_o": m_o, "b_leaf": g.b,
                  "b_root": r.b}
        if m_o > 0:
            values["o"] = g.b_o / m_o
        return values


def test_a_second_column_is_read_by_every_claim_and_plotted(tmp_path: Path) -> None:
    experiment = ch3.Chapter3(evaluators=(ch3.ClosedFormColumn(), RecursionColumn()))
    result = run(experiment, out=tmp_path, full=True)
    assert result.columns == ["model", "recursion"]
    values = {o.claim.id: o.values for o in result.outcomes}
    # straight from a grid point
    assert values["bs0/1000"]["recursion"] == pytest.approx(116_000)
    assert values["table/81000/x"]["recursion"] == pytest.approx(88_856.4, abs=0.05)
    # from a curve: the break-even interpolated between grid points 5,000 apart, the peak of
    # the toggle traffic at its best grid point
    leaf = values["break-even/b_leaf/1000/600/60"]["recursion"]
    assert leaf == pytest.approx(299_172, abs=150)
    assert values["bo-peak-n"]["recursion"] == 57_393
    # the model-only internals stay empty in that column without failing the claim
    assert values["table/81000/n̄"]["recursion"] is None
    # A grid 5,000 apart cannot give every break-even to 4 significant digits: the verdict
    # checks each column against the claim's tolerance, so exactly those are not met ...
    failed = {o.claim.id for o in result.outcomes if not o.met}
    assert failed and all(f.startswith("break-even/") for f in failed), failed
    for o in result.outcomes:
        if o.claim.id.startswith("break-even/"):
            assert o.values["recursion"] == pytest.approx(o.claim.paper, rel=2e-3)
    assert not result.met
    # ... until the claims give that column a tolerance of its own
    lenient = ch3.Chapter3(evaluators=experiment.evaluators)
    lenient.column_tolerance = {"recursion": Tolerance(relative=2e-3)}
    again = run(lenient, out=tmp_path, full=True)
    assert again.met and again.evaluated == 0
    report = result.report.read_text()
    assert "| recursion | recursion − paper |" in report
