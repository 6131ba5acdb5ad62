"""Explore: one scenario under many seeds, each with a random nemesis, judged by the checker.

FoundationDB's simulation and TigerBeetle's VOPR run thousands of seeds and replay any failure
from its seed; `explore` does that for a scenario: for each seed it draws a nemesis
(nemesis.py: the scenario's own data with a random fault schedule and reconfigurations, the
workload's seed varied too), runs it in the simulator (weeble.sim.run.simulate, deterministic
by seed), and reads the reference checker's verdict (weeble.check, rule R14). Failing seeds are
grouped by the rule they break (`broken_rules`), each with its first failing episode; the
coverage says which fault kinds, corruption targets, layers, rules and algorithms the runs
exercised, and which corruption targets were left out of the draw as outside the
configuration's fault model, and why (nemesis.fault_model). Drawn anyway (`outside_model`), a
seed that fails with such a fault in its schedule is reported apart, as outside the fault
model: the bound Δ is not promised for it. A failing seed's scenario is written as YAML beside
its summary, for `weeble simulate` and `weeble shrink`.

Runs go to worker processes (`jobs`); every run's result is a function of its scenario data.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from weeble.chaos.nemesis import (
    LOSS_DURING_EXCHANGE,
    Nemesis,
    draw,
    fault_model,
    losses_during_exchanges,
)
from weeble.core.broker import FAULTS
from weeble.model.scenario import Scenario, parse_scenario

FAIL = "fail"
# a failing seed whose schedule holds a fault outside the configuration's fault model
OUTSIDE = "outside the fault model"

# The rules of docs/trace-schema.md a failing verdict part names, by what its reason says.
RULES = {
    "missing": "R5 missing delivery",
    "spurious": "R5 spurious delivery",
    "duplicate": "R5 duplicate delivery",
    "fifo": "R7 per-publisher FIFO",
    "causal": "R7 causal order",
    "service": "R11 service-level stabilization > Δ",
    # a verdict part that fails for want of evidence: a rule of its own, so that shrinking
    # never trades a late stabilization for an episode without publications
    "unobserved": "R11 no publication observed after the episode",
    "state": "R12 state-level stabilization > Δ",
    "reconfiguration": "R15 reconfiguration lost/duplicated/reordered",
}


def broken_rules(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The rules a run breaks, in the order of the verdict's parts: [{rule, part, reason,
    episode}] (episode: the index of the failing episode, None outside episodes). Parts whose
    status is `assumptions violated` break no rule: the run left the timing model."""
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for part in summary["verdict"]["parts"]:
        if part["status"] != FAIL:
            continue
        name, reason = part["part"], part["reason"]
        if name.startswith("reconfiguration"):
            keys = ["reconfiguration"]
        elif name.startswith("episode"):
            problems = [p.strip() for p in reason.split(";")]
            keys = ["unobserved" if "no publications observed" in p else p.split(":")[0]
                    for p in problems if p.startswith(("service:", "state:"))] or ["state"]
        else:
            keys = [k for k in ("missing", "spurious", "duplicate", "fifo", "causal")
                    if k in reason] or ["missing"]
        for k in keys:
            if (RULES[k], name) not in seen:
                seen.add((RULES[k], name))
                out.append({"rule": RULES[k], "part": name, "reason": reason,
                            "episode": part.get("episode")})
    return out


def digest(summary: dict[str, Any], trace_dir: Path | None = None) -> str:
    """SHA-256 of a run: its summary without the wall-clock `performance` part, and its trace
    files (sorted by name) when it has them."""
    h = hashlib.sha256()
    h.update(json.dumps({k: v for k, v in summary.items() if k != "performance"},
                        sort_keys=True).encode())
    if trace_dir is not None and trace_dir.is_dir():
        for p in sorted(trace_dir.rglob("*")):
            if p.is_file():
                h.update(p.name.encode())
                h.update(p.read_bytes())
    return h.hexdigest()


def simulate_data(data: dict[str, Any], out: Path, *, trace: bool = False) -> dict[str, Any]:
    """Run a scenario's data in the simulator into `out`; its summary as a dict."""
    from weeble.chaos.runner import in_simulation
    from weeble.sim.run import simulate

    data = dict(data)
    data["trace"] = {**data.get("trace", {}), "enabled": trace}
    if not trace:
        data["trace"].pop("sends", None)
        data["trace"].pop("snapshots_every", None)
    scenario = parse_scenario(data, source=str(data.get("name", "<scenario>")))
    summary = simulate(scenario, out, progress=False, faults=in_simulation(scenario))
    return summary.as_dict()


@dataclass
class SeedResult:
    """One seed's run, as explore reports it."""

    seed: int
    status: str  # the verdict's: pass, fail, assumptions violated; error: the run raised;
    # OUTSIDE: it failed, with a fault outside the fault model in its schedule
    rules: list[dict[str, Any]]
    digest: str
    wall: float
    faults: list[dict[str, Any]]  # kind, field, took_effect per injected fault
    reconfigurations: int
    episodes: list[dict[str, Any]]  # the failing episodes (first first)
    error: str | None = None
    deterministic: bool | None = None  # --check-determinism: the two runs' digests agree
    data: dict[str, Any] = field(default_factory=dict)  # the scenario that ran
    outside: list[str] = field(default_factory=list)  # its faults outside the model (targets)


def run_seed(scenario_data: dict[str, Any], seed: int, nemesis: Nemesis,
             check_determinism: bool = False) -> SeedResult:
    """Draw the nemesis for `seed`, run it, judge it (in a worker process)."""
    base = parse_scenario(scenario_data, source=str(scenario_data.get("name")))
    start = time.perf_counter()
    try:
        data = draw(base, seed, nemesis)
        with tempfile.TemporaryDirectory(prefix="weeble-explore-") as tmp:
            summary = simulate_data(data, Path(tmp) / "a", trace=check_determinism)
            first = digest(summary, Path(tmp) / "a" / "trace")
            same = None
            if check_determinism:
                again = simulate_data(data, Path(tmp) / "b", trace=True)
                same = first == digest(again, Path(tmp) / "b" / "trace")
    except Exception as exc:  # a crash of the simulator is a finding too
        return SeedResult(seed=seed, status="error", rules=[{
            "rule": "simulator raised", "part": "the run", "reason": f"{type(exc).__name__}:"
            f" {exc}", "episode": None}], digest="", wall=time.perf_counter() - start,
            faults=[], reconfigurations=0, episodes=[], error=f"{type(exc).__name__}: {exc}",
            data=locals().get("data") or {})
    rules = broken_rules(summary)
    failing = {r["episode"] for r in rules if r["episode"] is not None}
    chaos = {f.get("name") or f"f{i}": f for i, f in enumerate(
        (data.get("chaos") or {}).get("faults", []))}
    faults = [{"kind": f["kind"], "field": chaos.get(f["id"], {}).get("field"),
               "took_effect": f["took_effect"]} for f in summary["faults"]]
    model = fault_model(base, reconfigures=True).outside
    outside = sorted({f["field"] for f in chaos.values()
                      if f.get("kind") == "corrupt" and f.get("field") in model})
    if losses_during_exchanges(base, data):
        outside.append(LOSS_DURING_EXCHANGE)
    status = summary["verdict"]["status"]
    if status == FAIL and outside:
        status = OUTSIDE  # not held to the bound: no layer of this configuration repairs it
    return SeedResult(
        seed=seed, status=status, rules=rules, digest=first, outside=outside,
        wall=time.perf_counter() - start, faults=faults,
        reconfigurations=len(summary["reconfigurations"]),
        episodes=[e for e in summary["episodes"] if e["index"] in failing],
        deterministic=same, data=data)


@dataclass
class Report:
    """What explore found over all seeds."""

    scenario: str
    seeds: list[int]
    results: list[SeedResult]
    wall: float
    # corruption targets outside the fault model -> why; `drawn`: the nemesis drew them too
    outside_model: dict[str, str] = field(default_factory=dict)
    drawn_outside: bool = False

    @property
    def failing(self) -> list[SeedResult]:
        return [r for r in self.results if r.status in (FAIL, "error")]

    @property
    def failing_outside(self) -> list[SeedResult]:
        """Seeds that failed with a fault outside the fault model in their schedule."""
        return [r for r in self.results if r.status == OUTSIDE]

    def by_rule(self, results: list[SeedResult] | None = None) -> dict[str, list[SeedResult]]:
        """Failing seeds (or `results`) grouped by the first rule each breaks."""
        out: dict[str, list[SeedResult]] = {}
        for r in sorted(self.failing if results is None else results, key=lambda r: r.seed):
            out.setdefault(r.rules[0]["rule"] if r.rules else "fail", []).append(r)
        return out

    def coverage(self, scenario: Scenario) -> dict[str, Any]:
        kinds: dict[str, int] = {}
        fields: dict[str, int] = {}
        layers: dict[str, int] = {}
        effective = 0
        total = 0
        for r in self.results:
            for f in r.faults:
                total += 1
                effective += bool(f["took_effect"])
                kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
                if f["field"]:
                    fields[f["field"]] = fields.get(f["field"], 0) + 1
                    t = FAULTS.targets.get(f["field"])
                    if t is not None:
                        layers[t.layer] = layers.get(t.layer, 0) + 1
        rules: dict[str, int] = {}
        for r in self.results:
            for rule in {x["rule"] for x in r.rules}:
                rules[rule] = rules.get(rule, 0) + 1
        return {
            "algorithm": scenario.routing.algorithm.value,
            "hierarchical": scenario.routing.hierarchical, "mode": scenario.mode.value,
            "overlay": scenario.overlay.kind.value,
            "faults": total, "took_effect": effective,
            "kinds": dict(sorted(kinds.items())), "fields": dict(sorted(fields.items())),
            "layers": dict(sorted(layers.items())),
            "reconfigurations": sum(r.reconfigurations for r in self.results),
            "rules_broken": dict(sorted(rules.items())),
            "statuses": _count(r.status for r in self.results),
            # the targets outside the configuration's fault model, why, and whether drawn
            "outside_model": {"drawn": self.drawn_outside,
                              "targets": dict(sorted(self.outside_model.items()))},
        }

    def as_dict(self, scenario: Scenario) -> dict[str, Any]:
        def groups(results: list[SeedResult]) -> dict[str, list[dict[str, Any]]]:
            return {rule: [{"seed": r.seed, "part": r.rules[0]["part"],
                            "reason": r.rules[0]["reason"],
                            "first_failing_episode": r.episodes[0] if r.episodes else None,
                            **({"outside": r.outside} if r.outside else {})}
                           for r in rs] for rule, rs in self.by_rule(results).items()}

        out: dict[str, Any] = {
            "scenario": self.scenario, "seeds": len(self.seeds),
            "first_seed": self.seeds[0] if self.seeds else None,
            "failing": len(self.failing), "by_rule": groups(self.failing),
            "failing_outside_model": len(self.failing_outside),
            "outside_model_by_rule": groups(self.failing_outside),
            "coverage": self.coverage(scenario), "wall_time": self.wall,
        }
        checked = [r for r in self.results if r.deterministic is not None]
        if checked:
            out["determinism"] = {"checked": len(checked),
                                  "differing": [r.seed for r in checked if not r.deterministic]}
        return out


def _count(values: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))


def explore(scenario: Scenario, seeds: list[int], *, jobs: int = 1,
            nemesis: Nemesis | None = None, out: Path | None = None,
            check_determinism: bool = False, stop_after: int | None = None,
            progress: Callable[[int, int, int], None] | None = None) -> Report:
    """Run `scenario` under each seed with a random nemesis, `jobs` at a time. `out`: where
    each failing seed's scenario.yaml and result go (out/seed-<n>/). `stop_after`: stop once
    this many seeds failed. `progress(done, total, failing)` after each run."""
    nemesis = nemesis or Nemesis()
    data = scenario.model_dump(mode="json", exclude_unset=True)
    start = time.perf_counter()
    results: list[SeedResult] = []

    def done(r: SeedResult) -> None:
        results.append(r)
        if out is not None and r.status in (FAIL, "error", OUTSIDE):
            write_failure(out, r)
        if progress is not None:
            progress(len(results), len(seeds), sum(x.status in (FAIL, "error")
                                                   for x in results))

    def enough() -> bool:
        return stop_after is not None and sum(
            x.status in (FAIL, "error") for x in results) >= stop_after

    if jobs <= 1:
        for seed in seeds:
            done(run_seed(data, seed, nemesis, check_determinism))
            if enough():
                break
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            pending: set[Future[SeedResult]] = set()
            todo = list(seeds)
            while todo or pending:
                while todo and len(pending) < 2 * jobs and not enough():
                    pending.add(pool.submit(run_seed, data, todo.pop(0), nemesis,
                                            check_determinism))
                if not pending:
                    break
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in finished:
                    done(f.result())
                if enough():
                    todo.clear()
    results.sort(key=lambda r: r.seed)
    return Report(scenario.name, [r.seed for r in results], results,
                  time.perf_counter() - start,
                  outside_model=outside_model(scenario, bool(
                      scenario.reconfigurations.operations) or any(
                      r.reconfigurations for r in results)),
                  drawn_outside=nemesis.outside_model)


def outside_model(scenario: Scenario, reconfigures: bool) -> dict[str, str]:
    """What the configuration's fault model leaves out -> why: the corruption targets no layer
    repairs (on the static overlay, its RAM exists only in runs that reconfigure), and, where
    links are exchanged, message loss on an exchange's cycle while it runs."""
    out = dict(fault_model(scenario, reconfigures).outside)
    if reconfigures and scenario.colours is None:
        out[LOSS_DURING_EXCHANGE] = ("the coordinated link exchange (4.4.2) assumes reliable"
                                     " links while it runs and has no timeout")
    return out


def write_failure(out: Path, r: SeedResult) -> Path:
    """out/seed-<n>/scenario.yaml (the run, for `weeble simulate` and `weeble shrink`) and
    result.json (the rules it breaks, its failing episodes)."""
    where = out / f"seed-{r.seed}"
    where.mkdir(parents=True, exist_ok=True)
    outside = f"\n{OUTSIDE}: {', '.join(r.outside)}" if r.outside else ""
    (where / "scenario.yaml").write_text(dump_scenario(r.data, comment=(
        f"explore: seed {r.seed} fails {r.rules[0]['rule'] if r.rules else r.status}"
        + outside)))
    (where / "result.json").write_text(json.dumps({
        "seed": r.seed, "status": r.status, "rules": r.rules, "episodes": r.episodes,
        "digest": r.digest, "error": r.error, "outside": r.outside}, indent=2) + "\n")
    return where


def dump_scenario(data: dict[str, Any], comment: str = "") -> str:
    """A scenario's data as YAML, with a leading comment."""
    head = "".join(f"# {line}\n" for line in comment.splitlines())
    return head + yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)


def default_jobs() -> int:
    return max(1, min(4, (os.cpu_count() or 1)))


__all__ = ["OUTSIDE", "RULES", "Report", "SeedResult", "broken_rules", "digest", "dump_scenario",
           "explore", "run_seed", "simulate_data", "write_failure"]
