"""An example chaos suite: each test brings the scenario's brokers up (the `weeble_testbed`
fixture of weeble's pytest plugin), does something to them under traffic, and asserts the
verdict of the reference checker. Run it like any pytest suite:

    pytest examples/chaos-suite --junitxml=chaos.xml            # local backend
    pytest examples/chaos-suite --weeble-backend mininet        # as root, another backend
"""

from __future__ import annotations

from pathlib import Path

from weeble.core.reconfig.plan import ExchangeLink
from weeble.testing import assert_verdict

SCENARIO = Path(__file__).with_name("scenario.yaml")


def test_the_root_forgets_its_routing_table(weeble_testbed):
    bed = weeble_testbed(SCENARIO)
    bed.wait(2)  # the subscriptions reach the tables
    outcome = bed.inject({"kind": "corrupt", "target": "root", "field": "table.clear"})
    assert outcome.took_effect
    bed.wait_for_stabilization()
    assert_verdict(bed.verdict())


def test_a_lossy_link_heals(weeble_testbed):
    bed = weeble_testbed(SCENARIO)
    bed.wait(2)
    bed.inject({"kind": "drop", "link": ["b0", "b1"], "probability": 0.5, "duration": 2})
    bed.wait_for_stabilization()
    verdict = bed.verdict()
    assert_verdict(verdict)
    (fault,) = verdict.faults
    assert fault["service_time"] <= fault["bound"]


def test_a_crashed_leaf_comes_back(weeble_testbed):
    bed = weeble_testbed(SCENARIO)
    bed.wait(2)
    bed.experiment({"name": "leaf-crash", "faults": [
        {"kind": "crash", "target": "b4", "at": 0, "duration": 1},
        {"kind": "corrupt", "target": "b1", "field": "entry.filter", "at": 2}]})
    bed.wait_for_stabilization()
    verdict = bed.verdict()
    assert_verdict(verdict)
    assert len(verdict.faults) == 2


def test_a_link_exchange_loses_nothing(weeble_testbed):
    bed = weeble_testbed(SCENARIO)
    bed.wait(2)
    record = bed.reconfigure(ExchangeLink(remove=("b1", "b4"), add=("b4", "b2")))
    assert record.outcome == "done"
    bed.wait(2)
    verdict = bed.verdict()
    assert_verdict(verdict)
    (r,) = verdict.reconfigurations
    assert (r["lost"], r["duplicated"], r["reordered"], r["verdict"]) == (0, 0, 0, "pass")
