"""The simulator: determinism, FIFO links, delay models, timers, link faults, the workload's
equilibrium, the delivery oracle, and `weeble simulate` end to end."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from weeble.chaos.runner import in_simulation
from weeble.core.events import (
    ClientPublish,
    Receive,
    Send,
    SetTimer,
    Start,
    TimerFired,
)
from weeble.core.filters import Filter
from weeble.core.messages import Notification, Notify, Sub, Switch, Unsub
from weeble.model.scenario import Scenario, Trace, load_scenario, parse_scenario
from weeble.sim.engine import Engine
from weeble.sim.run import Summary, simulate
from weeble.sim.workload import Clients, ClientSub

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "scenarios" / "sim-small.yaml"
F = Filter.equals("class", 1)


class Scripted:
    """A throwaway broker: records every event; `script(now, event)` returns its effects."""

    def __init__(self, script: Callable[[float, Any], list] | None = None) -> None:
        self.script = script or (lambda now, event: [])
        self.events: list[tuple[float, Any]] = []

    def step(self, now: float, event: Any) -> list:
        self.events.append((now, event))
        return self.script(now, event)

    def received(self) -> list[tuple[float, Any]]:
        return [(t, e.message) for t, e in self.events if type(e) is Receive]


def forwarder(to: str) -> Callable[[float, Any], list]:
    """Sends on the message of every Receive (only `send_at` hands it one)."""
    def script(now: float, event: Any) -> list:
        if type(event) is Receive:
            return [Send(to, event.message)]
        return []
    return script


def pair(delay: str, lo: float = 0.01, hi: float = 0.05, seed: int = 1) -> tuple[Engine, Scripted]:
    a, b = Scripted(forwarder("b")), Scripted()
    engine = Engine({"a": a, "b": b}, [("a", "b")], delta_min=lo, delta_max=hi, delay=delay,
                    seed=seed)
    return engine, b


def send_at(engine: Engine, t: float, msg: Notification | Sub | Unsub | Switch) -> None:
    """Make broker a send `msg` (a notification in a Notify) to b at time t."""
    message = Notify(msg) if isinstance(msg, Notification) else msg
    engine.schedule(t, lambda now, a, b: engine.inject(now, "a", Receive("test", message)))


def note(seq: int, t: float) -> Notification:
    return Notification("p", seq, {"class": 1}, t)


# ---- links ----------------------------------------------------------------------------------


def test_uniform_delays_stay_in_bounds_and_links_stay_fifo() -> None:
    engine, b = pair("uniform")
    times = [i * 0.002 for i in range(500)]  # far closer together than the delay spread
    for i, t in enumerate(times):
        send_at(engine, t, note(i, t))
    engine.run(10.0)
    got = b.received()
    assert [m.notification.seq for _, m in got] == list(range(500))  # never reordered
    latencies = [arrival - m.notification.published_at for arrival, m in got]
    assert all(0.01 - 1e-12 <= x <= 0.05 + 1e-12 for x in latencies)
    assert max(latencies) - min(latencies) > 0.02  # the delays really vary
    assert [t for t, _ in got] == sorted(t for t, _ in got)


def test_constant_delay_is_delta_max() -> None:
    engine, b = pair("constant")
    send_at(engine, 1.0, note(1, 1.0))
    engine.run(5.0)
    assert b.received()[0][0] == pytest.approx(1.05)


def test_adversarial_delay_alternates_fast_and_slow_copies_of_a_subscription() -> None:
    engine, b = pair("adversarial")
    send_at(engine, 1.0, Sub("s1", F))
    send_at(engine, 2.0, Sub("s1", F))  # a refresh: same id, slow
    send_at(engine, 3.0, Sub("s1", F))  # fast again: arrives 1 - 2*(0.05 - 0.01) after the last
    send_at(engine, 4.0, note(1, 4.0))
    send_at(engine, 5.0, Unsub("s1", F))
    send_at(engine, 6.0, Sub("s1", F))  # after the unsubscription it is a first copy again
    engine.run(10.0)
    sent = [1, 2, 3, 4, 5, 6]
    latencies = [round(t - s, 6) for (t, _), s in zip(b.received(), sent, strict=True)]
    assert latencies == [0.01, 0.05, 0.01, 0.05, 0.01, 0.01]


def test_same_seed_same_delays_other_seed_other_delays() -> None:
    def arrivals(seed: int) -> list[float]:
        engine, b = pair("uniform", seed=seed)
        for i in range(20):
            send_at(engine, i * 1.0, note(i, i * 1.0))
        engine.run(30.0)
        return [t for t, _ in b.received()]

    assert arrivals(3) == arrivals(3)
    assert arrivals(3) != arrivals(4)


def test_link_faults_drop_duplicate_and_delay_for_a_window() -> None:
    engine, b = pair("constant")
    engine.set_link_fault("a", "b", drop=1.0)
    send_at(engine, 1.0, note(1, 1.0))
    engine.run(2.0)
    engine.set_link_fault("a", "b", drop=0.0, duplicate=1.0)
    send_at(engine, 3.0, note(2, 3.0))
    engine.run(4.0)
    engine.set_link_fault("a", "b", duplicate=0.0, delay=2.0)  # F11: beyond delta_max
    send_at(engine, 5.0, note(3, 5.0))
    send_at(engine, 5.5, note(4, 5.5))
    engine.run(6.0)
    engine.set_link_fault("a", "b", clear_delay=True)
    send_at(engine, 6.0, note(5, 6.0))  # legal again, but queued behind the slow ones (FIFO)
    engine.run(20.0)
    got = [(round(t, 6), m.notification.seq) for t, m in b.received()]
    assert got == [(3.05, 2), (3.05, 2), (7.0, 3), (7.5, 4), (7.5, 5)]
    assert (engine.dropped, engine.duplicated) == (1, 1)
    assert engine.sent[Notify] == 5


def test_sends_to_a_non_neighbour_are_counted_and_discarded() -> None:
    a = Scripted(lambda now, e: [Send("nobody", Notify(note(1, now)))] if now > 0 else [])
    engine = Engine({"a": a}, [], delta_min=0.01, delta_max=0.05)
    engine.inject(1.0, "a", Start())
    assert engine.stray == 1 and engine.pending() == 0


# ---- timers ---------------------------------------------------------------------------------


def test_set_timer_replaces_the_pending_timer_of_the_same_name() -> None:
    def script(now: float, event: Any) -> list:
        if type(event) is Start:
            return [SetTimer("t", 5.0), SetTimer("u", 3.0)]
        if type(event) is ClientPublish and now == 1.0:
            return [SetTimer("t", 7.0)]  # later than the pending one
        if type(event) is ClientPublish and now == 8.0:
            return [SetTimer("t", 12.0), SetTimer("t", 9.0)]  # earlier than the pending one
        if type(event) is ClientPublish and now == 20.0:
            return [SetTimer("t", 15.0)]  # in the past: fires now
        return []

    broker = Scripted(script)
    engine = Engine({"x": broker}, [], delta_min=0.0, delta_max=0.1)
    engine.start(0.0)
    for t in (1.0, 8.0, 20.0):
        engine.schedule(
            t, lambda now, a, b: engine.inject(now, "x", ClientPublish("p", note(1, now))))
    engine.run(30.0)
    fired = [(t, e.timer) for t, e in broker.events if type(e) is TimerFired]
    assert fired == [(3.0, "u"), (7.0, "t"), (9.0, "t"), (20.0, "t")]


def test_schedule_in_order_runs_items_in_the_order_schedule_gives() -> None:
    """The lane of `schedule_in_order` (only its first item on the heap) changes nothing in the
    order of events: items in order, out of order, at equal times, scheduled from handlers,
    interleaved with `schedule` and with constant-delay arrivals, run as with `schedule` alone."""

    def order(in_order: bool) -> tuple[list[tuple[float, str]], int]:
        ran: list[tuple[float, str]] = []

        def receive(now: float, event: Any) -> list:
            ran.append((now, "receive"))
            return []

        a = Scripted(lambda now, e: [Send("b", Notify(note(1, now)))]
                     if type(e) is ClientPublish else [])
        engine = Engine({"a": a, "b": Scripted(receive)}, [("a", "b")],
                        delta_min=0.5, delta_max=0.5, delay="constant")
        lane = engine.schedule_in_order if in_order else engine.schedule

        def tick(now: float, name: Any, left: Any) -> None:
            ran.append((now, name))
            if left:
                lane(now + 1.0, tick, name, left - 1)  # now + ρ, as a client refreshes
                engine.schedule(now + 0.5, lambda t, a, b: ran.append((t, "plain")))
                engine.inject(now, "a", ClientPublish("p", note(1, now)))

        for t, name in [(2.0, "x"), (1.0, "y"), (2.0, "z"), (2.0, "w"), (0.5, "v"), (3.0, "u")]:
            lane(t, tick, name, 4)  # out of order: y and v go on the heap itself
        engine.schedule(2.0, lambda t, a, b: ran.append((t, "between")))
        engine.run(5.0)
        return ran, engine.pending()

    assert order(in_order=True) == order(in_order=False)
    ran, pending = order(in_order=True)
    assert len(ran) > 60 and pending > 0


# ---- the workload ---------------------------------------------------------------------------


class Counting:
    def __init__(self) -> None:
        self.live = 0

    def started(self, t: float, sub: ClientSub) -> None:
        self.live += 1

    def ended(self, t: float, sub: ClientSub) -> None:
        self.live -= 1

    def published(self, t: float, n: Notification, cls: int | None) -> None:
        pass


def workload_scenario(**workload: Any) -> Scenario:
    return parse_scenario({
        "name": "w", "seed": 5, "duration": 400,
        "topology": {"kind": "kary", "m": 3, "levels": 3},
        "routing": {"algorithm": "identity", "hierarchical": True},
        "timing": {"pi": 10.1, "rho": 10, "delta_min": 0.025, "delta_max": 0.025},
        "workload": {"filter_classes": 50, "subscriptions": 2000, "mean_lifetime": 40,
                     "publish_rate": 200, **workload},
    })


def test_workload_starts_in_equilibrium_and_publishes_at_omega() -> None:
    scenario = workload_scenario()
    topology = scenario.build_topology()
    brokers = {b: Scripted() for b in topology.brokers}
    engine = Engine(brokers, topology.links, delta_min=0.025, delta_max=0.025)
    counting = Counting()
    clients = Clients(engine, scenario, counting)
    samples: list[int] = []

    def sample(t: float, a: object, b: object) -> None:
        samples.append(len(clients.live))
        engine.schedule(t + 1.0, sample)

    engine.schedule(0.0, sample)
    clients.start()
    engine.run(400.0)
    mean = sum(samples) / len(samples)
    assert mean == pytest.approx(2000, rel=0.03)
    assert samples[0] == 2000  # warm start: already at equilibrium at t = 0
    assert clients.publications / 400 == pytest.approx(200, rel=0.03)
    # A subscription living L is refreshed floor(L/rho) times: rate λ·q/(1-q), q = exp(-rho/µ⁻¹)
    q = math.exp(-10 / 40)
    assert clients.refreshes / 400 == pytest.approx(2000 / 40 * q / (1 - q), rel=0.05)
    assert counting.live == len(clients.live)
    leaves = set(topology.leaves("b0"))
    subscribers = {b for b, broker in brokers.items()
                   if any(type(e).__name__ == "ClientSubscribe" for _, e in broker.events)}
    publishers = {b for b, broker in brokers.items()
                  if any(type(e) is ClientPublish for _, e in broker.events)}
    assert subscribers == leaves and publishers == leaves


def test_workload_crashing_subscribers_do_not_unsubscribe() -> None:
    scenario = workload_scenario(subscribers_crash=1.0, subscriptions=200, publish_rate=0)
    topology = scenario.build_topology()
    brokers = {b: Scripted() for b in topology.brokers}
    engine = Engine(brokers, topology.links, delta_min=0.025, delta_max=0.025)
    clients = Clients(engine, scenario, Counting())
    clients.start()
    engine.run(100.0)
    assert clients.crashes > 0 and clients.unsubscriptions == 0
    assert not any(type(e).__name__ == "ClientUnsubscribe"
                   for broker in brokers.values() for _, e in broker.events)


# ---- whole runs -----------------------------------------------------------------------------


def deterministic_part(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k != "performance"}


def trace_bytes(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / "trace").glob("*.jsonl"))}


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, dict]:
    """sim-small through its first two faults, twice, tracing everything."""
    scenario = load_scenario(SMALL).model_copy(
        update={"duration": 130.0, "trace": Trace(sends=True, snapshots_every=50.0)})
    out = tmp_path_factory.mktemp("traced")
    one = simulate(scenario, out / "one", progress=False, faults=in_simulation(scenario))
    two = simulate(scenario, out / "two", progress=False, faults=in_simulation(scenario))
    return out, one.as_dict(), two.as_dict()


def test_same_seed_gives_identical_summary_and_trace(traced: tuple[Path, dict, dict]) -> None:
    out, one, two = traced
    assert deterministic_part(one) == deterministic_part(two)
    assert trace_bytes(out / "one") == trace_bytes(out / "two")


def test_another_seed_gives_another_run(tmp_path: Path) -> None:
    scenario = load_scenario(SMALL).model_copy(
        update={"duration": 30.0, "trace": Trace(enabled=False), "chaos": None})
    one = simulate(scenario, tmp_path / "one", progress=False)
    other = simulate(scenario.model_copy(update={"seed": 2}), tmp_path / "two", progress=False)
    assert other.deliveries != one.deliveries
    assert not (tmp_path / "one" / "trace").exists()


def test_trace_records_carry_schema_version_time_node_and_kind(
    traced: tuple[Path, dict, dict],
) -> None:
    out, _, _ = traced
    kinds = set()
    for path in (out / "one" / "trace").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            assert record["v"] == 2 and isinstance(record["t"], int)
            assert {"node", "kind"} <= set(record)
            kinds.add(record["kind"])
    assert {"publish", "deliver", "subscribe", "refresh", "unsubscribe", "send", "receive",
            "fault_begin", "fault_end", "snapshot", "legitimacy", "fault"} <= kinds


def test_fault_free_run_is_legitimate_and_loses_nothing(tmp_path: Path) -> None:
    scenario = load_scenario(SMALL).model_copy(update={"duration": 120.0, "chaos": None})
    s = simulate(scenario, tmp_path, progress=False)
    d = s.deliveries
    assert d["expected"] > 1000
    assert d["missing"] == d["duplicate"] == d["spurious"] == d["phantom"] == d["fifo"] == 0
    assert s.legitimacy["illegitimate"] == 0 and s.legitimacy["checks"] == 120
    assert s.stabilization is None and s.episodes == []  # no fault: no stabilization time
    assert s.verdict["status"] == "pass"


def test_oracle_flags_spurious_deliveries_from_a_corrupted_local_entry(tmp_path: Path) -> None:
    scenario = load_scenario(SMALL)
    bogus = {"at": 50, "kind": "corrupt", "target": "b4", "field": "entry.insert",
             "value": {"sub_id": "bogus", "filter": "class == 5", "dest": "alice", "flag": 1}}
    data = {**scenario.model_dump(mode="json", exclude_none=True),
            "chaos": {"faults": [bogus]}, "duration": 120}
    s = simulate_faults(parse_scenario(data), tmp_path)
    assert s.deliveries["spurious"] > 0  # alice holds "class == 3 && price < 100" only
    (episode,) = s.episodes  # gone within Δ (second chance)
    assert episode["service_time"] <= s.bound and s.verdict["pass"]
    assert s.faults[0]["targets"] == ["b4"] and s.faults[0]["took_effect"]
    assert s.faults[0]["error"] is None


def test_crashed_subscribers_and_crash_faults(tmp_path: Path) -> None:
    scenario = load_scenario(SMALL)
    data = scenario.model_dump(mode="json", exclude_none=True)
    data["workload"]["subscribers_crash"] = 0.5
    data["chaos"] = {"faults": [{"at": 60, "kind": "client_crash", "clients": {"random": 20}},
                                {"at": 60, "kind": "client_crash", "clients": "alice"}]}
    data["duration"] = 150
    s = simulate_faults(parse_scenario(data), tmp_path)
    assert s.clients["crashes"] > 20
    assert s.deliveries["window"] > 0  # leases linger up to 2π after a crash (F12)
    assert s.deliveries["spurious"] == 0
    assert s.verdict["pass"], s.verdict["reasons"]
    assert len(s.faults[0]["targets"]) == 20 and s.faults[1]["targets"] == ["alice"]
    assert all(f["took_effect"] for f in s.faults)


def simulate_faults(scenario: Scenario, out: Path) -> Summary:
    return simulate(scenario, out, progress=False, faults=in_simulation(scenario))


# ---- the command line -----------------------------------------------------------------------

SUMMARY_KEYS = {
    "v", "scenario", "seed", "duration", "topology", "routing", "params", "bound", "messages",
    "link_faults", "clients", "deliveries", "legitimacy", "faults", "episodes", "stabilization",
    "timing", "verdict", "performance", "reconfigurations", "overlay", "steady", "optimizer",
}


def weeble(*args: str, hash_seed: str = "0") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    return subprocess.run([sys.executable, "-m", "weeble.cli", *args], capture_output=True,
                          text=True, env=env, timeout=300)


def test_cli_simulate_end_to_end_and_across_hash_seeds(tmp_path: Path) -> None:
    one = weeble("simulate", str(SMALL), "--out", str(tmp_path / "one"), "--quiet")
    assert one.returncode == 0, one.stderr
    summary = json.loads((tmp_path / "one" / "summary.json").read_text())
    assert set(summary) == SUMMARY_KEYS
    assert set(summary["messages"]) == {"sub", "unsub", "notify", "switch", "total", "per_second"}
    assert {"expected", "delivered", "missing", "duplicate", "spurious", "fifo"} <= set(
        summary["deliveries"])
    assert summary["bound"] == pytest.approx(40.3)
    # every fault of sim-small takes effect, and the system is legitimate again within Δ
    assert summary["legitimacy"]["first_illegitimate"] is not None
    assert 0 < summary["stabilization"]["state"] <= summary["bound"]
    assert 0 < summary["stabilization"]["service"] <= summary["bound"]
    assert summary["verdict"]["status"] == "pass"
    # String hashing differs between processes unless PYTHONHASHSEED is fixed: the run must not.
    two = weeble("simulate", str(SMALL), "--out", str(tmp_path / "two"), "--quiet",
                 hash_seed="12345")
    assert two.returncode == 0, two.stderr
    again = json.loads((tmp_path / "two" / "summary.json").read_text())
    assert deterministic_part(again) == deterministic_part(summary)
    assert trace_bytes(tmp_path / "one") == trace_bytes(tmp_path / "two")


def test_cli_bad_scenario_exits_2_with_a_clear_message(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(SMALL.read_text().replace("algorithm: identity", "algorithm: identiti"))
    result = weeble("simulate", str(bad), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert result.stderr.startswith(f"weeble: error: {bad}: routing.algorithm:")
    assert "Traceback" not in result.stderr
    missing = weeble("simulate", str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "out"))
    assert missing.returncode == 2
    assert "nope.yaml: no such file" in missing.stderr and "Traceback" not in missing.stderr


def test_cli_usage_error_is_argparse_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from weeble.cli import main

    with pytest.raises(SystemExit) as info:
        main(["simulate"])
    assert info.value.code == 2
    assert "--out" in capsys.readouterr().err


def test_a_replaced_step_runs_instead_of_the_brokers_own() -> None:
    """The engine calls a core Broker's step directly (`Node.native`); a step set on the node
    (a crash, a restart, `retire`) must run instead from then on."""
    from weeble.core.broker import Broker
    from weeble.core.rom import Algorithm, Params, Rom

    params = Params(pi=10.0, rho=5.0, delta_min=0.01, delta_max=0.1, d=4)
    rom = Rom(broker_id="x", neighbors=frozenset(), root="x", parent=None,
              algorithm=Algorithm.SIMPLE, params=params)
    engine = Engine({"x": Broker(rom)}, [], delta_min=0.0, delta_max=0.1)
    node = engine.nodes["x"]
    assert node.native is not None
    assert any(type(e) is SetTimer for e in engine.inject(0.0, "x", Start()))
    seen: list[Any] = []
    node.step = lambda now, event: seen.append(event) or []
    assert node.native is None
    engine.inject(1.0, "x", Start())
    assert [type(e) for e in seen] == [Start]
