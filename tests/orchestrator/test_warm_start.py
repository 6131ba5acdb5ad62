"""The workload's warm start before the run's origin (live.warm_start_rate, issue 25): `weeble
run` establishes the plan's N_s subscriptions at t = 0 first, each acknowledged by its broker,
then moves the run's origin (its header) past them, and only then starts the plan's clock:
publications, arrivals and the chaos experiment. The papers' simulations start in equilibrium,
with the subscriptions in place; sent all at once with the first publications they were a storm
that broke the timing model (hops of 0.28 s against δmax = 25 ms on 13 brokers)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from tests.runtime.livebed import next_base_host, weeble
from weeble.model.scenario import parse_scenario
from weeble.model.workload import Publish, Subscribe, workload_plan


def test_the_warm_start_is_in_place_before_the_runs_origin(tmp_path: Path) -> None:
    data = {
        "name": "warm-start", "duration": 3, "seed": 4,
        "topology": {"kind": "chain", "brokers": 3},
        "routing": {"algorithm": "identity"},
        "timing": {"pi": 2.0, "rho": 1.0, "delta_min": 0.0, "delta_max": 0.05},
        "workload": {"filter_classes": 3, "subscriptions": 8, "mean_lifetime": 4.0,
                     "publish_rate": 8, "subscriber_placement": "all",
                     "publisher_placement": "all"},
        "check_every": None,
        "live": {"base_host": next_base_host(), "metrics_port": None, "drain": 0.5,
                 "startup_timeout": 60, "warm_start_rate": 20},
    }
    path = tmp_path / "warm.yaml"
    path.write_text(yaml.safe_dump(data))
    runs = tmp_path / "runs"
    done = weeble("run", str(path), "--no-analysis", "--runs-dir", str(runs),
                  "--run-id", "warm", "--any-ports", timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    # stderr is a pipe, no terminal: each phase on a line, the run's progress on plain lines
    progress = [line for line in done.stderr.splitlines()
                if re.match(r"(starting|warm start|run|stopping)\b", line)]
    assert progress[:3] == ["starting 3 brokers", "warm start warm", "run warm"], progress
    assert progress[-2].startswith("run warm: 3/3 s, "), progress
    assert progress[-1] == "stopping: draining, collecting traces"

    plan = list(workload_plan(parse_scenario(data, source="<test>")))
    warm = {a.sub_id for a in plan if isinstance(a, Subscribe) and a.t == 0}
    later = {a.sub_id for a in plan if isinstance(a, Subscribe) and a.t > 0}
    assert len(warm) == 8 and later, "the test needs arrivals after the warm start"
    records = [json.loads(line) for f in (runs / "warm" / "trace").glob("*.jsonl")
               for line in f.read_text().splitlines() if line.strip()]
    (origin,) = [r["t"] for r in records if r["kind"] == "run"]
    first = {}  # sub_id -> (kind -> its first record's t)
    for r in sorted(records, key=lambda r: r["t"]):
        if r["kind"] in ("client_subscribe", "subscribe"):
            first.setdefault(r["sub_id"], {}).setdefault(r["kind"], r["t"])
    # every warm-start subscription was asked for and reached its broker before t = 0 (the
    # broker's `subscribe` record: it has the subscription), none of the arrivals was
    assert {s for s, kinds in first.items() if kinds["client_subscribe"] < origin} == warm
    assert all(first[s]["subscribe"] < origin for s in warm), first
    assert all(first[s]["client_subscribe"] > origin for s in later & first.keys())
    # the plan's clock starts at the origin: every planned publication, after it
    published = {(r["publisher"], r["seq"]): r["t"] for r in records
                 if r["kind"] == "client_publish"}
    assert published.keys() == {(a.publisher, a.seq) for a in plan if isinstance(a, Publish)}
    assert min(published.values()) > origin
    stats = json.loads((runs / "warm" / "summary.json").read_text())["workload"]
    assert stats["warm_start"] == 8 and stats["subscriptions"] == len(first)
