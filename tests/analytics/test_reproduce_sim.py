"""The simulation column of `weeble reproduce ch3`: the simulator agrees with the cost model.

Two small points of the thesis's §3.3.3 setup (complete trees of 31 and 40 brokers, 300 filter
classes, a warm start, one overrun period measured after the first), each run in the one
simulator and read from its summary's `steady` window: the routing-table size x, the control
traffic bc and the saved notifications bs agree with the closed forms (3.22), (3.33) and
(3.25)−(3.32) within 5 %. And the column runs through `weeble reproduce` into the report.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from weeble.analytics.costmodel import CompleteTree, closed_form
from weeble.analytics.reproduce import ch3
from weeble.analytics.reproduce.framework import Point, run

POINTS = {  # (m, k, z, ω, µ⁻¹, ρ, N_s)
    "binary-31-brokers": (2, 5, 300, 300.0, 300.0, 20.0, 4000.0),
    "ternary-40-brokers": (3, 4, 300, 300.0, 600.0, 20.0, 8000.0),
}


@pytest.mark.parametrize("name", list(POINTS))
def test_simulation_and_model_agree_within_5_percent(name: str) -> None:
    m, k, z, omega, mu_inv, rho, n = POINTS[name]
    tree = CompleteTree(m=m, k=k)
    scenario = ch3.sim_scenario(tree=tree, z=z, omega=omega, mu_inv=mu_inv, rho=rho, n=n)
    sim = ch3.simulated(scenario)
    model = closed_form(tree=tree, z=z, n_subscriptions=n, omega=omega, mu=1 / mu_inv, rho=rho)
    for quantity, expected in (("x", model.x), ("b_c", model.b_c),
                               ("saved_leaf", model.saved_leaf), ("b_f", model.b_f)):
        assert sim[quantity] == pytest.approx(expected, rel=0.05), (
            f"{name}: {quantity} simulated {sim[quantity]:.1f}, model {expected:.1f}")
    # the measured window is one whole overrun period after the first one
    assert scenario.measure is not None
    assert scenario.duration - scenario.measure.start == pytest.approx(scenario.timing.pi)


def test_the_steady_window_of_the_summary_counts_what_it_says(tmp_path: Path) -> None:
    from weeble.sim.run import simulate

    tree = CompleteTree(m=2, k=3)
    scenario = ch3.sim_scenario(tree=tree, z=10, omega=50.0, mu_inv=60.0, rho=5.0, n=40.0)
    summary = simulate(scenario, tmp_path, progress=False)
    steady = summary.steady
    assert steady is not None and summary.messages["total"] > 0
    span = steady["until"] - steady["from"]
    counts, rates = steady["messages"], steady["per_second"]
    # a window, not the whole run (the warm start's subscriptions fall before it)
    assert 0 < counts["sub"] < summary.messages["sub"]
    assert rates["control"] == pytest.approx((counts["sub"] + counts["unsub"]) / span)
    assert rates["flooding"] == pytest.approx(steady["publications"] * tree.n_links / span)
    assert rates["saved"] == pytest.approx(rates["flooding"] - counts["notify"] / span)
    assert steady["entries"]["samples"] == 4
    assert 0 < steady["entries"]["remote"] <= 10 * tree.n_links
    # the first messages of new subscriptions, flag-1 forwards apart: part of `sub`
    new = steady["new_subscriptions"]
    assert new["flag1"] > 0 and new["toggle"] > 0
    firsts = new["flag1"] + new["relayed"] + new["toggle"] + new["other"]
    assert firsts + new["repeat_refresh"] <= counts["sub"]
    assert rates["repeats"] == pytest.approx((new["repeat_new"] + new["repeat_refresh"]) / span)
    assert rates["flag1"] == pytest.approx(new["flag1"] / span)
    assert rates["relayed"] == pytest.approx(new["relayed"] / span)


def test_no_flag1_forwards_without_new_subscriptions(tmp_path: Path) -> None:
    """Subscriptions that outlive the run: none is new in the window, so the control traffic
    is refreshes alone, and nothing is counted as a flag-1 forward."""
    from weeble.sim.run import simulate

    tree = CompleteTree(m=2, k=3)
    scenario = ch3.sim_scenario(tree=tree, z=10, omega=50.0, mu_inv=1e9, rho=5.0, n=40.0)
    steady = simulate(scenario, tmp_path, progress=False).steady
    assert steady is not None
    assert steady["messages"]["sub"] > 0 and steady["messages"]["unsub"] == 0
    assert set(steady["new_subscriptions"].values()) == {0}


class NoSubscriptions(ch3.SimulationColumn):
    """The simulation column at the one thesis point that runs in seconds: no subscriptions."""

    def applies_to(self, point: Point, *, full: bool) -> bool:
        return point.key == ch3.point(1000.0, 600.0, 60.0, 0.0).key


def test_the_column_measures_the_thesis_claims_at_its_points(tmp_path: Path) -> None:
    """121 brokers, ω = 1000/s, no subscriptions: the simulator measures the flooding traffic
    (120,000/s) and the bs of l.1632 (116,000/s: every notification still climbs to the root),
    and the report shows both columns."""
    experiment = ch3.Chapter3(evaluators=(ch3.ClosedFormColumn(), NoSubscriptions()))
    result = run(experiment, out=tmp_path, jobs=2)  # the simulation in a worker process
    assert result.columns == ["model", "simulation"]
    values = {o.claim.id: o.values for o in result.outcomes}
    assert values["flooding/1000"]["simulation"] == pytest.approx(120_000, rel=0.02)
    assert values["bs0/1000"]["simulation"] == pytest.approx(116_000, rel=0.02)
    assert values["table/0/x"]["simulation"] == 0
    assert values["x-limit"]["simulation"] is None  # N = 0 does not stand for large N
    assert result.met
    report = result.report.read_text()
    assert "## Model against simulation, per simulated point" in report
    assert "| simulation | simulation − paper |" in report
    again = run(experiment, out=tmp_path, jobs=2)
    assert again.evaluated == 0 and again.met  # resumed: nothing simulated twice
