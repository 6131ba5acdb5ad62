"""Runs of the simulator that must not depend on Python's string hashing: each reduced to a
digest (as in tests/sim/sim_golden.py), printed as JSON by `python -m tests.sim.sim_hashorder`.
`tests/sim/test_sim_hashorder.py` runs this module under two PYTHONHASHSEED values and compares.

A set's iteration order follows the hashes of its strings, which differ per process unless
PYTHONHASHSEED is fixed. Found this way: `from_edges(tree.edges)` gave the simulator a tree's
links in set order, so the brokers' boot times (drawn in broker order) depended on it, and the
colour-scheme property example below failed under 2 of 51 hash seeds.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.sim.sim_golden import scenario_digest
from weeble.model.scenario import Scenario

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _scenario(file: str, **change: Any) -> Callable[[], str]:
    def run() -> str:
        data = yaml.safe_load((SCENARIOS / file).read_text())
        for key, value in change.items():
            data[key] = {**data[key], **value} if isinstance(value, dict) else value
        return scenario_digest(Scenario.model_validate(data))

    return run


def _canonical(x: Any) -> Any:
    if isinstance(x, set | frozenset):
        return sorted(map(str, x))
    return str(x)


def _colour_property(count: int) -> str:
    """The colour-scheme property (tests/sim/test_colours_traffic.py) on `count` drawn examples:
    a digest of every trace record of each."""
    from tests.sim.test_colours_traffic import ALGORITHMS, run_faults_and_requests

    g = random.Random(1659)
    h = hashlib.sha256()
    for _ in range(count):
        net = run_faults_and_requests(
            seed=g.randint(0, 10**6), brokers=g.randint(3, 10), alg=g.choice(ALGORITHMS[1:]),
            degree=g.choice([0, 2, 3]), subscriptions=g.randint(1, 6),
            requests=g.randint(0, 3), faults=g.randint(1, 8))
        for t, node, tr in net.traces:
            fields = json.dumps(tr.fields, sort_keys=True, default=_canonical)
            h.update(f"{t!r} {node} {tr.kind} {fields}\n".encode())
    return h.hexdigest()


def runs() -> dict[str, Callable[[], str]]:
    return {
        "reconfig-colours": _scenario("reconfig-colours.yaml"),
        "reconfig-exchange": _scenario("reconfig-exchange.yaml"),
        "reconfig-exchange-causal-adverts": _scenario(
            "reconfig-exchange.yaml", routing={"adverts": True},
            reconfigurations={"ordering": "causal"}),
        "reconfig-strawman": _scenario("reconfig-exchange.yaml",
                                       reconfigurations={"strawman": True}),
        "optimizer-ci": _scenario("optimizer.yaml", duration=40),
        "optimizer-mst": _scenario("optimizer.yaml", duration=40,
                                   optimizer={"heuristic": "mst"}),
        "optimizer-mit": _scenario("optimizer.yaml", duration=40,
                                   optimizer={"heuristic": "mit"}),
        "quickstart-chaos": _scenario("quickstart.yaml"),
        "colour-property": lambda: _colour_property(12),
    }


def digests() -> dict[str, str]:
    return {name: run() for name, run in runs().items()}


if __name__ == "__main__":
    print(json.dumps(digests(), indent=1, sort_keys=True))
