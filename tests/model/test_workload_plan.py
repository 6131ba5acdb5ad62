"""The workload plan (weeble/model/workload.py): one pure function of (scenario, seed) that the
simulator and the live clients both carry out."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from weeble.model.scenario import Scenario, parse_scenario
from weeble.model.workload import Publish, Subscribe, workload_plan
from weeble.sim.run import simulate

BASE: dict[str, Any] = {
    "name": "plan",
    "seed": 3,
    "duration": 200,
    "topology": {"kind": "kary", "m": 2, "levels": 3},
    "routing": {"algorithm": "identity"},
    "timing": {"pi": 2.2, "rho": 2.0, "delta_min": 0.025, "delta_max": 0.025},
    "workload": {"filter_classes": 5, "subscriptions": 30, "mean_lifetime": 20,
                 "publish_rate": 4, "subscribers_crash": 0.3},
    "subscriptions": [{"client": "alice", "broker": "b1", "filter": "class == 1", "start": 3,
                       "end": 50},
                      {"client": "alice", "broker": "b2", "filter": "class == 2", "start": 3}],
    "publications": [{"at": 7, "broker": "b3", "attributes": {"class": 1}},
                     {"at": 7, "broker": "b4", "attributes": {"class": 2.0},
                      "client": "pb3"}],
}


def scenario(**changes: Any) -> Scenario:
    data = json.loads(json.dumps(BASE))
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key].update(value)
        else:
            data[key] = value
    return parse_scenario(data)


def as_tuples(actions: Any) -> list[tuple[Any, ...]]:
    out = []
    for a in actions:
        if isinstance(a, Subscribe):
            out.append(("sub", a.t, a.client, a.broker, a.sub_id, str(a.filter), a.cls, a.end,
                        a.crashes, a.first_refresh))
        else:
            out.append(("pub", a.t, a.broker, a.publisher, a.seq, dict(a.attributes), a.cls))
    return out


def test_the_plan_is_a_pure_function_of_scenario_and_seed() -> None:
    s = scenario()
    first, again = as_tuples(workload_plan(s)), as_tuples(workload_plan(s))
    assert first == again and len(first) > 800
    assert as_tuples(workload_plan(s, seed=4)) != first
    assert as_tuples(workload_plan(s, seed=3)) == first  # the scenario's seed by default


def test_actions_come_in_time_order_within_the_run() -> None:
    s = scenario()
    times = [a.t for a in workload_plan(s)]
    assert times == sorted(times) and times[-1] <= s.duration
    assert [a.t for a in workload_plan(s, until=50)] == [t for t in times if t <= 50]


def test_the_warm_start_is_the_equilibrium_with_random_refresh_phases() -> None:
    s = scenario()
    warm = [a for a in workload_plan(s) if isinstance(a, Subscribe) and a.cls is not None
            and a.t == 0]
    assert [a.sub_id for a in warm] == [f"c{n}/0" for n in range(30)]
    phases = [a.first_refresh for a in warm]
    assert all(0 < p <= 2.0 for p in phases) and len(set(phases)) == 30  # not in lockstep
    leaves = {"b3", "b4", "b5", "b6"}
    workload = [a for a in workload_plan(s) if isinstance(a, Subscribe) and a.cls is not None]
    assert {a.broker for a in workload} <= leaves and {a.cls for a in workload} <= set(range(5))
    arrivals = [a for a in workload if a.t > 0]
    assert all(a.first_refresh == a.t + 2.0 for a in arrivals)
    assert all(a.end > a.t for a in workload)
    # about 30% end by crashing; the rest unsubscribe
    crash_share = sum(a.crashes for a in workload) / len(workload)
    assert 0.15 < crash_share < 0.45
    # Poisson arrivals at N_s / lifetime = 1.5/s over 200 s: 300 expected
    assert 240 < len(arrivals) < 360


def test_explicit_clients_and_sequence_numbers() -> None:
    s = scenario()
    plan = list(workload_plan(s))
    alice = [a for a in plan if isinstance(a, Subscribe) and a.client == "alice"]
    assert [(a.sub_id, a.broker, a.end) for a in alice] == [("alice/0", "b1", 50.0),
                                                            ("alice/1", "b2", math.inf)]
    seqs: dict[str, list[int]] = {}
    for a in plan:
        if isinstance(a, Publish):
            seqs.setdefault(a.publisher, []).append(a.seq)
    assert all(v == list(range(1, len(v) + 1)) for v in seqs.values())
    explicit = [a for a in plan if isinstance(a, Publish) and a.t == 7]
    # pb3 publishes at b4 too: its seqs run on across its brokers
    assert {(a.publisher, a.broker, a.cls) for a in explicit} == {("pb3", "b3", 1),
                                                                  ("pb3", "b4", None)}


def test_publications_do_not_shift_the_subscription_history() -> None:
    """Separate streams: changing ω leaves every subscription as it was."""
    subs = [x for x in as_tuples(workload_plan(scenario())) if x[0] == "sub"]
    faster = [x for x in as_tuples(workload_plan(scenario(workload={"publish_rate": 40})))
              if x[0] == "sub"]
    assert subs == faster


def test_the_simulator_carries_out_the_plan(tmp_path: Path) -> None:
    """Every subscribe, unsubscribe, crash and publish of a simulated run is the plan's."""
    s = scenario(duration=60, check_every=None)
    simulate(s, tmp_path, progress=False)
    records = [json.loads(line) for f in sorted((tmp_path / "trace").glob("*.jsonl"))
               for line in f.read_text().splitlines()]
    seen = {(r["kind"], r["sub_id"], r["broker"], round(r["t"] / 1e9, 6)) for r in records
            if r["kind"] in ("subscribe", "unsubscribe", "crash")}
    published = {(r["publisher"], r["seq"], r["broker"]) for r in records
                 if r["kind"] == "publish"}
    planned: set[tuple[str, str, str, float]] = set()
    planned_pubs = set()
    for a in workload_plan(s):
        if isinstance(a, Subscribe):
            planned.add(("subscribe", a.sub_id, a.broker, round(a.t, 6)))
            if a.end <= s.duration:
                planned.add(("crash" if a.crashes else "unsubscribe", a.sub_id, a.broker,
                             round(a.end, 6)))
        else:
            planned_pubs.add((a.publisher, a.seq, a.broker))
    assert seen == planned
    assert published == planned_pubs
