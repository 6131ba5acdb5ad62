"""Shrink: cut a failing run down to what still breaks the same rule.

A failing run is a scenario's data (the YAML `weeble explore` writes for a failing seed, or any
scenario) and the rule it breaks (explore.broken_rules). `shrink` keeps a candidate when the
simulator, deterministic by seed, still breaks that rule with it, and tries, until nothing more
goes (delta debugging, Zeller's ddmin, over each list):

- the fault schedule: which faults (ddmin), then each fault simpler: shorter, earlier,
  probability 1, a whole partition narrowed to one subtree's top;
- the reconfigurations (ddmin over the operations);
- the clients: the workload's plan written out as explicit subscriptions and publications (when
  that still fails), then ddmin over the subscriptions, and over the publications after the
  most of their head and tail that can go is cut by halving;
- the brokers, where the topology allows: a leaf no fault, client or operation names is taken
  out of the tree (written as `topology: {kind: edges, ...}`);
- the duration: the end of the run moved to the last thing that happens plus Δ, then shorter.

The result is a scenario that `weeble simulate` runs, with the same verdict; `runs` counts the
simulations shrinking took.
"""

from __future__ import annotations

import copy
import math
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from weeble.chaos.evidence import TRACE_FILE
from weeble.chaos.explore import broken_rules, simulate_data
from weeble.model.faults import ENTRY_FIELDS, RANDOM_FIELD
from weeble.model.scenario import ScenarioError, parse_scenario
from weeble.model.workload import Publish, Subscribe, workload_plan
from weeble.model.workload import _workload_publications as workload_publications
from weeble.model.workload import _workload_subscriptions as workload_subscriptions

T = TypeVar("T")
Data = dict[str, Any]


class ShrinkError(ValueError):
    """The run to shrink does not fail, or not the rule asked for."""


class Budget(Exception):
    """The run budget is spent: shrinking stops with the smallest failing run so far."""


@dataclass
class Shrunk:
    data: Data  # the minimal scenario
    rule: str
    summary: dict[str, Any]  # its run's summary
    runs: int  # simulations shrinking took (the first one included)
    before: dict[str, int]  # sizes of the run it started from
    after: dict[str, int]
    log: list[str] = field(default_factory=list)  # what each accepted step removed


def sizes(data: Data) -> dict[str, int | float]:
    """What a scenario is made of: faults, reconfigurations, clients, publications, brokers,
    duration (workload clients counted as the plan has them)."""
    s = parse_scenario(copy.deepcopy(data), source="<shrink>")
    clients: set[str] = set()
    publications = 0
    for action in workload_plan(s):
        if isinstance(action, Subscribe):
            clients.add(action.client)
        elif isinstance(action, Publish):
            publications += 1
    return {"faults": len(s.chaos.faults) if s.chaos is not None else 0,
            "reconfigurations": len(s.reconfigurations.operations),
            "clients": len(clients), "subscriptions": sum(
                isinstance(a, Subscribe) for a in workload_plan(s)),
            "publications": publications, "brokers": len(s.build_topology().brokers),
            "duration": s.duration}


class Shrinker:
    def __init__(self, data: Data, rule: str | None = None, *, max_runs: int = 600,
                 say: Callable[[str], None] | None = None) -> None:
        self.runs = 0
        self.max_runs = max_runs
        self.say = say or (lambda _: None)
        self.log: list[str] = []
        self.tmp = tempfile.TemporaryDirectory(prefix="weeble-shrink-")
        summary = self._run(data)
        rules = [r["rule"] for r in broken_rules(summary)] if summary is not None else []
        if not rules:
            status = summary["verdict"]["status"] if summary is not None else "invalid"
            raise ShrinkError(f"the run does not fail (verdict: {status}): nothing to shrink")
        if rule is None:
            rule = rules[0]
        elif rule not in rules:
            raise ShrinkError(f"the run does not break {rule!r} (it breaks: {', '.join(rules)})")
        self.rule = rule
        self.best, self.summary = copy.deepcopy(data), summary

    # ---- the predicate ----------------------------------------------------------------------

    def _run(self, data: Data) -> dict[str, Any] | None:
        if self.runs >= self.max_runs:
            raise Budget
        self.runs += 1
        try:
            parse_scenario(copy.deepcopy(data), source="<shrink>")
        except (ScenarioError, ValueError):
            return None  # a candidate the scenario's checks refuse is no smaller failing run
        return simulate_data(copy.deepcopy(data), Path(self.tmp.name) / str(self.runs))

    def fails(self, data: Data) -> bool:
        summary = self._run(data)
        if summary is None or not any(r["rule"] == self.rule for r in broken_rules(summary)):
            return False
        self.best, self.summary = copy.deepcopy(data), summary
        return True

    def attempt(self, what: str, data: Data) -> bool:
        if data == self.best:
            return False
        ok = self.fails(data)
        if ok:
            self.log.append(what)
            self.say(f"shrink: {what} (run {self.runs})")
        return ok

    # ---- the passes -------------------------------------------------------------------------

    def shrink(self) -> Shrunk:
        before = sizes(self.best)
        try:
            self.pin()
            self.cut_duration()
            for _ in range(3):
                start = copy.deepcopy(self.best)
                self.faults()
                self.reconfigurations()
                self.clients()
                self.simplify_faults()
                self.brokers()
                self.cut_duration()
                if self.best == start:
                    break
        except Budget:
            self.say(f"shrink: the budget of {self.max_runs} runs is spent")
        return Shrunk(data=self.best, rule=self.rule, summary=self.summary, runs=self.runs,
                      before=before, after=sizes(self.best), log=self.log)

    def _list(self, what: str, get: Callable[[Data], list[Any]],
              put: Callable[[Data, list[Any]], None], granularity: int | None = None) -> None:
        items = get(self.best)
        if not items:
            return

        def test(subset: list[Any]) -> bool:
            data = copy.deepcopy(self.best)
            put(data, subset)
            return self.attempt(f"{what}: {len(items)} -> {len(subset)}", data)

        ddmin(items, test, max_granularity=granularity)

    def pin(self) -> None:
        """Corruptions that leave what they hit to chance, written out as they struck, before
        anything is cut (a cut changes the tables, and each fault's random stream is named
        by its position in the list): a minimal run then changes the entry the failing run
        did, in the simulator and live alike."""
        if not any(_by_chance(f) for f in (self.best.get("chaos") or {}).get("faults", [])):
            return
        if self.runs >= self.max_runs:
            raise Budget
        self.runs += 1  # the traced run whose evidence gives the pins
        pinned, what = pin_corruptions(self.best, Path(self.tmp.name) / "pin")
        if what and not self.attempt(f"pinned: {'; '.join(what)}", pinned):
            self.say("shrink: with its corruptions pinned the run no longer breaks"
                     f" {self.rule!r}: left as drawn")

    def faults(self) -> None:
        def get(d: Data) -> list[Any]:
            return list((d.get("chaos") or {}).get("faults", []))

        def put(d: Data, faults: list[Any]) -> None:
            if faults:
                d["chaos"] = {**d["chaos"], "faults": faults}
            else:
                d.pop("chaos", None)

        self._list("faults", get, put)

    def reconfigurations(self) -> None:
        def get(d: Data) -> list[Any]:
            return list((d.get("reconfigurations") or {}).get("operations", []))

        def put(d: Data, ops: list[Any]) -> None:
            d["reconfigurations"] = {**d.get("reconfigurations", {}), "operations": ops}

        self._list("reconfigurations", get, put)

    def clients(self) -> None:
        if self.best.get("workload") is not None:
            explicit = materialize(self.best)
            if explicit is None or not self.attempt("the workload written out", explicit):
                self.workload_knobs()
                return

        def subs(d: Data) -> list[Any]:
            return list(d.get("subscriptions", []))

        def put_subs(d: Data, x: list[Any]) -> None:
            d["subscriptions"] = x

        def pubs(d: Data) -> list[Any]:
            return list(d.get("publications", []))

        def put_pubs(d: Data, x: list[Any]) -> None:
            d["publications"] = x

        self._list("subscriptions", subs, put_subs)
        self._ends("publications", pubs, put_pubs)
        self._list("publications", pubs, put_pubs, granularity=64)

    def _ends(self, what: str, get: Callable[[Data], list[Any]],
              put: Callable[[Data, list[Any]], None]) -> None:
        """The most of a list's tail, then of its head, that can go, by halving (a few runs
        each, log2 of the length): a workload's publications are in time order, and most of
        those long before or after what fails are not needed, which ddmin's bounded
        granularity finds only at the price of many runs. The tail first: what stays is the
        earliest that fails, so the run can end sooner."""
        for head in (False, True):
            items = get(self.best)
            keep_ok, cut_bad = 0, len(items)  # cuts known to keep the failure / not to
            while cut_bad - keep_ok > 1:
                cut = (keep_ok + cut_bad) // 2
                data = copy.deepcopy(self.best)
                put(data, items[cut:] if head else items[:len(items) - cut])
                side = "first" if head else "last"
                if self.attempt(f"{what}: the {side} {cut} of {len(items)} out", data):
                    keep_ok = cut
                else:
                    cut_bad = cut

    def workload_knobs(self) -> None:
        """A workload that cannot be written out (crashing subscribers) shrinks by its knobs."""
        for knob in ("subscriptions", "publish_rate", "filter_classes"):
            while True:
                w = self.best.get("workload")
                if w is None or not w.get(knob):
                    break
                data = copy.deepcopy(self.best)
                value = w[knob] // 2 if isinstance(w[knob], int) else w[knob] / 2
                if knob == "filter_classes" and value < 1:
                    break
                data["workload"][knob] = value
                if not self.attempt(f"workload.{knob}: {w[knob]} -> {value}", data):
                    break

    def simplify_faults(self) -> None:
        for i in range(len((self.best.get("chaos") or {}).get("faults", []))):
            f = self.best["chaos"]["faults"][i]
            for what, change in _simpler(f, self.window_start()):
                data = copy.deepcopy(self.best)
                data["chaos"]["faults"][i] = {**f, **change}
                if self.attempt(f"fault {i}: {what}", data):
                    f = self.best["chaos"]["faults"][i]

    def window_start(self) -> float:
        s = parse_scenario(copy.deepcopy(self.best), source="<shrink>")
        return min(s.params.pi, s.duration / 4)

    def brokers(self) -> None:
        """Leaves out of the tree, one at a time, while the rule still fails."""
        changed = True
        while changed:
            changed = False
            s = parse_scenario(copy.deepcopy(self.best), source="<shrink>")
            t = s.build_topology()
            if len(t.brokers) <= 2:
                return
            for leaf in reversed(t.leaves(s.root_broker)):
                edges = [list(e) for e in t.links if leaf not in e]
                data = copy.deepcopy(self.best)
                data["topology"] = {"kind": "edges", "edges": edges}
                if s.root is None:
                    data["root"] = s.root_broker
                if self.attempt(f"broker {leaf} out", data):
                    changed = True
                    break

    def cut_duration(self) -> None:
        """The end of the run: just after the last thing that happens plus Δ and a path time."""
        s = parse_scenario(copy.deepcopy(self.best), source="<shrink>")
        last = max([s.last_fault_end, *[at for at, _ in s.reconfiguration_plan()
                                        if at is not None]], default=0.0)
        # never shorter: a run that ends before Δ has passed after its last fault "fails" for
        # want of time, which is no smaller run of the same failure
        tight = math.ceil(last + s.bound + s.params.d * s.params.delta_max + 2.0)
        for duration in (tight,):
            if duration < s.duration:
                data = copy.deepcopy(self.best)
                data["duration"] = duration
                _drop_after(data, duration)
                self.attempt(f"duration: {s.duration:g} -> {duration:g} s", data)
                s = parse_scenario(copy.deepcopy(self.best), source="<shrink>")


def pin_corruptions(data: Data, out: Path) -> tuple[Data, list[str]]:
    """`data` with every corruption that leaves to chance what it hits (an entry.* fault
    without `entry`, or naming its entry by `index`, a `random` one) written out as the
    simulator carried it out, read from the evidence of its fault record: the field drawn, the
    value, the broker, and the entry pinned by its sub_id, filter and destination (`entry:`,
    model/faults.py EntryPin), never by its position in the table. Left as they are: faults
    that repeat (`every`), struck no broker or several, or changed no single entry. Returns
    the new data and what was pinned (empty: nothing to pin)."""
    faults = list((data.get("chaos") or {}).get("faults", []))
    if not any(_by_chance(f) for f in faults):
        return data, []
    from weeble.trace.reader import read_trace

    simulate_data(data, out, trace=True)
    begun = {r["fault_id"]: r for r in read_trace(out / "trace" / TRACE_FILE)
             if r.get("kind") == "fault_begin" and r.get("type") == "corrupt"}
    pinned, what = copy.deepcopy(data), []
    for i, f in enumerate(faults):
        record = begun.get(f.get("name") or f"f{i}")
        if not _by_chance(f) or f.get("every") is not None or record is None or \
                not record.get("took_effect") or len(record.get("evidence") or {}) != 1:
            continue
        [(broker, evidence)] = record["evidence"].items()
        concrete = _as_struck(evidence)
        if concrete is None:
            continue
        kept = {k: v for k, v in f.items() if k not in ("target", "field", "value", "args",
                                                        "entry")}
        pinned["chaos"]["faults"][i] = {**kept, "target": broker, **concrete}
        entry = concrete.get("entry")
        what.append(f"fault {i} {concrete['field']} @ {broker}"
                    + (f" on {entry['sub_id']}" if entry else ""))
    return pinned, what


def _by_chance(f: dict[str, Any]) -> bool:
    """A corrupt fault whose target entry (or whole fault) is drawn when it strikes."""
    if f.get("kind") != "corrupt" or f.get("entry") is not None:
        return False
    field_ = str(f.get("field", ""))
    if field_ == RANDOM_FIELD:
        return True
    args = f.get("args") or {}
    return field_.removeprefix("adv.") in ENTRY_FIELDS and "sub_id" not in args


def _as_struck(evidence: dict[str, Any]) -> dict[str, Any] | None:
    """A corruption's field, value, args and pinned entry, from one broker's evidence
    (actions._corrupt_one: field, value, args, changed); None when it changed no one entry."""
    field_, value = evidence.get("field"), evidence.get("value")
    args = dict(evidence.get("args") or {})
    out: dict[str, Any] = {"field": field_}
    if str(field_).removeprefix("adv.") in ENTRY_FIELDS:
        changed = (evidence.get("changed") or {}).get(
            "adv_tables" if str(field_).startswith("adv.") else "tables") or {}
        removed = changed.get("removed_sample") or []
        if changed.get("removed") != 1 or len(removed) != 1:
            return None
        old = removed[0]
        args = {"table": old["table"]} if old["table"] else {}
        out["entry"] = {"sub_id": old["sub_id"], "filter": old["filter"], "dest": old["dest"]}
        if field_ == "entry.flag" and value is None:  # a toggle: the flag it left
            added = changed.get("added_sample") or []
            value = added[0]["flag"] if len(added) == 1 else 1 - old["flag"]
    if value is not None:
        out["value"] = value
    if args:
        out["args"] = args
    return out


def _drop_after(data: Data, duration: float) -> None:
    """Explicit subscriptions and publications after the new end go."""
    data["publications"] = [p for p in data.get("publications", []) if p["at"] <= duration]
    data["subscriptions"] = [s for s in data.get("subscriptions", [])
                             if s.get("start", 0) < duration]
    for sub in data["subscriptions"]:
        if sub.get("end") is not None and sub["end"] >= duration:
            sub.pop("end")
    if data.get("measure") and data["measure"].get("start", 0) >= duration:
        data.pop("measure")
    if not data["publications"]:
        data.pop("publications")
    if not data["subscriptions"]:
        data.pop("subscriptions")


def _simpler(f: dict[str, Any], first: float) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    if f.get("duration") and f["duration"] > 0.5:
        out.append((f"duration {f['duration']:g} -> 0.5 s", {"duration": 0.5}))
        out.append((f"duration {f['duration']:g} -> {f['duration'] / 2:g} s",
                    {"duration": round(f["duration"] / 2, 3)}))
    if f.get("probability") is not None and f["probability"] < 1:
        out.append(("probability 1", {"probability": 1.0}))
    at = f.get("at")
    if at is not None and at > first + 0.5:
        out.append((f"at {at:g} -> {first:g} s", {"at": round(first, 3)}))
        out.append((f"at {at:g} -> {(at + first) / 2:g} s", {"at": round((at + first) / 2, 3)}))
    return out


def materialize(data: Data) -> Data | None:
    """The scenario with its workload written out as explicit subscriptions (clients s<n>) and
    publications, the plan's exactly (None: it has crashing subscribers, which no explicit
    subscription can stand for)."""
    s = parse_scenario(copy.deepcopy(data), source="<shrink>")
    w = s.workload
    if w is None:
        return copy.deepcopy(data)
    if w.subscribers_crash > 0:
        return None
    out = copy.deepcopy(data)
    out.pop("workload")
    subs, pubs = list(out.get("subscriptions", [])), list(out.get("publications", []))
    for a in workload_subscriptions(s, s.seed, s.duration):
        sub: dict[str, Any] = {"client": f"s{a.client[1:]}", "broker": a.broker,
                               "filter": str(a.filter), "start": a.t,
                               "first_refresh": a.first_refresh}
        if a.end < s.duration:
            sub["end"] = a.end
        subs.append(sub)
    for p in workload_publications(s, s.seed, s.duration):
        pubs.append({"at": p.t, "broker": p.broker, "attributes": dict(p.attributes)})
    out["subscriptions"], out["publications"] = subs, pubs
    # a client crash of workload clients names them c<n>: those are s<n> now
    for f in (out.get("chaos") or {}).get("faults", []):
        clients = f.get("clients")
        if isinstance(clients, list | str):
            names = [clients] if isinstance(clients, str) else clients
            f["clients"] = [f"s{c[1:]}" if c[:1] == "c" and c[1:].isdigit() else c
                            for c in names]
    return out


def ddmin(items: Sequence[T], test: Callable[[list[T]], bool],
          max_granularity: int | None = None) -> list[T]:
    """Zeller's ddmin: a 1-minimal sublist of `items` for which `test` holds (it holds for
    `items`; `test` of the empty list is tried first). `max_granularity`: split into at most
    that many chunks (bounds the runs on long lists, at the price of minimality)."""
    items = list(items)
    if test([]):
        return []
    n = 2
    while len(items) >= 2:
        chunk = math.ceil(len(items) / n)
        parts = [items[i:i + chunk] for i in range(0, len(items), chunk)]
        reduced = False
        for part in parts:  # a part alone
            if len(parts) > 1 and test(part):
                items, n, reduced = part, 2, True
                break
        if not reduced:
            for i in range(len(parts)):  # the complement of a part
                rest = [x for j, p in enumerate(parts) if j != i for x in p]
                if len(parts) > 2 and test(rest):  # (of two parts: the other part, tried)
                    items, n, reduced = rest, max(n - 1, 2), True
                    break
        if not reduced:
            if n >= len(items) or (max_granularity is not None and n >= max_granularity):
                break
            n = min(len(items), 2 * n)
    return items


__all__ = ["ShrinkError", "Shrinker", "Shrunk", "ddmin", "materialize", "pin_corruptions",
           "sizes"]
