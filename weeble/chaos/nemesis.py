"""A random nemesis: a seeded generator of the existing fault and reconfiguration data.

Jepsen's generators draw a random schedule of faults for every run; this is the same for the
one fault vocabulary of weeble/model/faults.py. `draw(scenario, seed, nemesis)` returns the
scenario's data (the dict a scenario YAML holds) with

- its seed replaced by `seed` (the workload's plan, random topologies, the faults' own random
  streams: all follow it),
- its `chaos:` replaced by a random experiment: faults from the whole vocabulary (state faults
  on every corruption target of every layer the scenario's brokers have, those outside the
  configuration's fault model only with `outside_model` (`fault_model`), clocks, injected
  messages, link shaping, cuts, flaps, partitions, crashes, pauses, client crashes), each with
  concrete targets and values, so that the run is a scenario file `weeble simulate` runs and
  `weeble shrink` can cut down,
- and, where the overlay allows it, random reconfigurations (link exchanges; on the coloured
  overlay, recolours to a new tree) beside its own.

The faults fall in a window that leaves the algorithm's bound Δ (and the path time) before the
end of the run, so the checker can judge the last episode. Rate and mix are Jepsen-style knobs:
`rate` faults per 100 simulated seconds of that window (at least one per run), `mix` the
relative weight of each family (FAMILIES).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from weeble.core.broker import FAULTS
from weeble.core.reconfig.exchange import POINTERS
from weeble.core.reconfig.plan import ExchangeLink, PlanError, apply, cycle, edge, random_exchange
from weeble.core.reconfig.plan import Tree as PlanTree
from weeble.core.rom import MERGING, Mode
from weeble.model.scenario import Scenario, parse_scenario

# The families of the mix and the fault kinds (or `reconfigure`) each draws from.
FAMILIES: dict[str, tuple[str, ...]] = {
    "state": ("corrupt",),
    "clock": ("clock",),
    "message": ("inject",),
    "link": ("drop", "duplicate", "garble", "delay", "cut", "flap", "partition"),
    "process": ("crash", "pause"),
    "client": ("client_crash",),
    "reconfigure": ("reconfigure",),
}
DEFAULT_MIX = {"state": 4.0, "clock": 1.0, "message": 1.0, "link": 3.0, "process": 1.0,
               "client": 1.0, "reconfigure": 1.0}


class NemesisError(ValueError):
    """A nemesis that cannot apply to the scenario (the message says why)."""


@dataclass(frozen=True)
class Nemesis:
    """How much and what kind of trouble: `rate` faults per 100 s of the fault window,
    `mix` the weight of each family, at most `max_faults` faults per run, faults lasting up to
    `max_duration` s (link shaping, cuts, pauses, crashes). A run draws between 1 and that many
    faults; with `exact`, that many (a soak wants its rate, not a sample below it). `exclude`
    names corruption targets left out, by name or prefix (`entry.insert`). The corruption
    targets outside the configuration's fault model (fault_model) are drawn only with
    `outside_model`."""

    rate: float = 5.0
    mix: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_MIX))
    max_faults: int = 6
    max_duration: float = 8.0
    exact: bool = False
    exclude: tuple[str, ...] = ()
    outside_model: bool = False

    def __post_init__(self) -> None:
        unknown = sorted(set(self.mix) - set(FAMILIES))
        if unknown:
            raise NemesisError(f"mix: unknown famil{'ies' if len(unknown) > 1 else 'y'}"
                               f" {', '.join(unknown)} (known: {', '.join(FAMILIES)})")
        if any(w < 0 for w in self.mix.values()) or not any(self.mix.values()):
            raise NemesisError("mix: weights must be >= 0 and at least one > 0")
        if self.rate <= 0 or self.max_faults < 1 or self.max_duration <= 0:
            raise NemesisError("rate, max_faults and max_duration must be > 0")


def parse_mix(text: str) -> dict[str, float]:
    """`state=4,link=2,...` -> weights (families left out weigh 0); `default` the default."""
    if text.strip() in ("", "default"):
        return dict(DEFAULT_MIX)
    out: dict[str, float] = {}
    for part in text.split(","):
        name, sep, weight = part.partition("=")
        name = name.strip()
        try:
            out[name] = float(weight) if sep else 1.0
        except ValueError:
            raise NemesisError(f"mix: {part!r}: the weight is not a number") from None
    Nemesis(mix=out)  # checks the names
    return out


def window(scenario: Scenario) -> tuple[float, float]:
    """[first, last] instant a fault may start: after the brokers' first lease period, and early
    enough that Δ and a path time fit after the longest fault before the run ends."""
    p = scenario.params
    first = min(p.pi, scenario.duration / 4)
    tail = scenario.bound + p.d * p.delta_max + 1.0
    return first, scenario.duration - tail


# Self-stabilization promises recovery from transient faults of the state the algorithm
# stabilizes, and no more. A corruption target is outside a configuration's fault model when no
# layer of that configuration repairs it: on the static overlay of chapter 3 the neighbour set
# is ROM, and the link exchange of 4.4.2 makes it (and its own state) RAM without a rule that
# brings it back; only the coloured overlay of 4.5 stabilizes its tree (docs/findings.md, "The
# static overlay has no layer that repairs it"). By the layer the vocabulary declares a target
# in (corruption.py's Target.layer): why each such layer is outside, on the static overlay.
OUTSIDE_ON_STATIC = {
    "overlay": "the static overlay's neighbour set and parent: ROM in chapter 3, RAM once a"
               " link exchange runs, and no layer repairs them (only the coloured overlay,"
               " `overlay: {kind: coloured}`, stabilizes its tree)",
    "exchange": "the link exchange's RAM on the static overlay: no layer repairs it (only the"
                " coloured overlay, `overlay: {kind: coloured}`, stabilizes its tree)",
}


@dataclass(frozen=True)
class FaultModel:
    """The corruption targets a configuration's brokers have, split by whether a layer of that
    configuration repairs them: `inside` (the transient faults its bound Δ is promised for)
    and `outside` (name -> why not)."""

    inside: tuple[str, ...]
    outside: dict[str, str]

    def targets(self, outside_model: bool = False) -> list[str]:
        """The targets a nemesis draws from: those inside, and the others with
        `outside_model`."""
        return sorted([*self.inside, *(self.outside if outside_model else ())])


def fault_model(scenario: Scenario, reconfigures: bool) -> FaultModel:
    """The corruption targets the scenario's brokers have (their layers), split by the fault
    model of its configuration. `reconfigures`: whether the run reconfigures; on the static
    overlay the neighbour set and the exchange's state exist as RAM only then (DESIGN.md, ROM
    and RAM), and are outside the model (OUTSIDE_ON_STATIC)."""
    coloured = scenario.colours is not None
    r = scenario.routing
    inside: list[str] = []
    outside: dict[str, str] = {}
    for name, t in sorted(FAULTS.targets.items()):
        if scenario.mode is Mode.SKIP_RING:
            ok = t.layer == "skip_ring" and name != "skipring.dead"
        elif t.layer == "skip_ring":
            ok = False
        elif t.layer == "anti_entropy":
            ok = scenario.mode is Mode.ANTI_ENTROPY
        elif t.layer == "optimize":
            ok = scenario.optimizer is not None and scenario.optimizer.heuristic != "none" \
                and name in ("optimize.cache.clear", "optimize.env.clear")
        elif t.layer in OUTSIDE_ON_STATIC and not coloured:
            if reconfigures and t.kind != "coloured":
                outside[name] = OUTSIDE_ON_STATIC[t.layer]
            ok = False
        elif t.layer == "overlay":
            ok = coloured and t.kind == "coloured"
        elif t.layer == "exchange":
            ok = False  # the coloured overlay reconfigures by recolouring, not by exchanges
        elif t.layer == "recolor":
            ok = coloured
        elif name.startswith("adv."):
            ok = r.adverts
        elif name.startswith("merger."):
            ok = r.algorithm in MERGING
        elif name == "rebuild_bit":
            ok = r.wrapper
        elif name == "clock":
            ok = False  # its own family
        elif name.startswith("colour."):
            ok = coloured
        else:
            ok = True
        if ok:
            inside.append(name)
    return FaultModel(inside=tuple(inside), outside=outside)


# The coordinated link exchange (thesis 4.4.2, spec ch4 §3.1) assumes reliable links while it
# runs and has no timeout: a coordination message lost on its cycle leaves the cycle locked for
# good (docs/findings.md, "An exchange that loses a coordination message stays locked"). A
# message-losing link fault on an exchange's cycle while it runs is outside its fault model.
LOSING = ("drop", "garble", "cut", "flap", "partition")
LOSS_DURING_EXCHANGE = "message loss on a link exchange's cycle while it runs"
# likewise an exchange started while a broker of its cycle is down (a crash): it cannot run,
# holds its cycle locked, and its state span covers the rest of the run (sweep seed 148)


def exchange_span(scenario: Scenario) -> float:
    """How long before and after a link exchange's start a message-losing fault on its cycle
    counts as during it: a lease period π, many rounds of the cycle at δmax (conservative)."""
    return max(1.0, scenario.params.pi)


def losses_during_exchanges(scenario: Scenario, data: dict[str, Any]) -> list[str]:
    """The message-losing faults of a run's data (by name, or f<i>) that fall on a link
    exchange's cycle while it runs (LOSS_DURING_EXCHANGE), and the crashes of a broker of its
    cycle that is down when it starts: outside the exchange's model."""
    faults = [f for f in (data.get("chaos") or {}).get("faults", [])
              if f["kind"] in LOSING or f["kind"] == "crash"]
    ops = (data.get("reconfigurations") or {}).get("operations", [])
    if not faults or not ops:
        return []
    t = scenario.build_topology()
    tree = PlanTree.of([tuple(link) for link in t.links], list(t.brokers))
    span = exchange_span(scenario)
    hit: list[str] = []
    for op in sorted(ops, key=lambda o: o.get("at", 0.0)):
        if op.get("op") != "exchange":
            continue
        x = ExchangeLink(remove=edge(*op["remove"]), add=edge(*op["add"]))
        try:
            path = cycle(tree, x)
            after = apply(tree, x)
        except PlanError:
            continue  # the scenario's own checks refuse it; not this function's business
        links = {edge(a, b) for a, b in pairwise(path)} | {x.add}
        for i, f in enumerate((data.get("chaos") or {}).get("faults", [])):
            if f not in faults:
                continue
            if f["kind"] == "crash":  # down when the exchange starts, on its cycle
                if f["target"] in path and f["at"] <= op["at"] <= f["at"] + f["duration"]:
                    hit.append(f.get("name") or f"f{i}")
                continue
            on = f["kind"] == "partition" or edge(*f["link"]) in links
            if on and f["at"] - span <= op["at"] <= f["at"] + f.get("duration", 0.0) + span:
                hit.append(f.get("name") or f"f{i}")
        tree = after
    return sorted(set(hit))


def targets_of(scenario: Scenario, reconfigures: bool, outside_model: bool = False
               ) -> list[str]:
    """The corruption targets a nemesis draws from for the scenario: those of its fault model
    (fault_model), and with `outside_model` the others its brokers have too."""
    return fault_model(scenario, reconfigures).targets(outside_model)


class _Draw:
    """One seed's random schedule over one scenario."""

    def __init__(self, scenario: Scenario, seed: int, nemesis: Nemesis) -> None:
        self.s, self.n = scenario, nemesis
        self.rng = random.Random(f"nemesis:{seed}")
        t = scenario.build_topology()
        self.brokers, self.links = list(t.brokers), [tuple(link) for link in t.links]
        self.neighbors = {b: sorted(t.neighbors(b)) for b in t.brokers}
        self.root = scenario.root_broker
        self.first, self.last = window(scenario)
        if self.last <= self.first:
            raise NemesisError(f"{scenario.name}: duration {scenario.duration:g} s leaves no"
                               f" window for faults (they need Δ = {scenario.bound:.3g} s and"
                               " the path time after them): make the run longer")
        self.reconfigurable = (scenario.mode is Mode.LEASING and scenario.optimizer is None
                               and not scenario.reconfigurations.strawman)
        mix = dict(nemesis.mix)
        if not self.reconfigurable:
            mix.pop("reconfigure", None)
        if scenario.mode is Mode.SKIP_RING:  # topics, no tree to shape or entries to inject
            mix.pop("message", None)
        if not len(self.links):
            for k in ("link", "message"):
                mix.pop(k, None)
        self.mix = {k: w for k, w in mix.items() if w > 0}
        if not self.mix:
            raise NemesisError(f"{scenario.name}: no family of the mix applies to it")
        self.own_operations = bool(scenario.reconfigurations.operations)
        # the filters clients hold (the explicit ones, the workload's classes) and ranges
        # over those classes that cover and overlap them (covering and merging have work)
        classes = scenario.workload.filter_classes if scenario.workload is not None else 0
        self.filters = sorted({sub.filter for sub in scenario.subscriptions}
                              | {f"class == {k}" for k in range(min(classes, 8))}
                              | ({f"class range [0, {classes // 2}]"} if classes > 1 else set())
                              ) or ["true"]

    def scenario(self, seed: int) -> dict[str, Any]:
        data = self.s.model_dump(mode="json", exclude_unset=True)
        data["seed"] = seed
        span = self.last - self.first
        count = max(1, min(self.n.max_faults, round(self.n.rate * span / 100)))
        if not self.n.exact:
            count = self.rng.randint(1, count)
        families = sorted(self.mix)
        weights = [self.mix[f] for f in families]
        drawn = [(self.rng.choices(families, weights)[0],
                  round(self.rng.uniform(self.first, self.last - self.n.max_duration), 3))
                 for _ in range(count)]
        # overlay and exchange RAM only where the run reconfigures (static tree: ROM until then)
        self.fields = [t for t in targets_of(self.s, self.own_operations or any(
            family == "reconfigure" for family, _ in drawn), self.n.outside_model)
            if not t.startswith(self.n.exclude)]
        faults: list[dict[str, Any]] = []
        exchanges: list[float] = []
        for family, at in drawn:
            if family == "reconfigure":
                exchanges.append(at)
                continue
            fault = self.fault(family, at)
            if fault is not None:
                faults.append(fault)
                if fault.get("field") in ("entry.insert", "merger.insert") and \
                        self.rng.random() < 0.3:
                    # a burst: the same fault at other brokers at the same instant, each with
                    # a value of its own (F13: a bogus entry at several brokers at once)
                    others = [b for b in self.brokers if b != fault["target"]]
                    for b in self.rng.sample(others, min(len(others), self.rng.randint(1, 3))):
                        faults.append({**fault, "target": b,
                                       **self.state_value(fault["field"], b)})
        if faults:
            faults.sort(key=lambda f: f["at"])
            data["chaos"] = {"name": "nemesis", "faults": faults}
        else:
            data.pop("chaos", None)
        if exchanges:
            self.reconfigure(data, sorted(exchanges))
            if not self.n.outside_model:
                self.keep_losses_off_exchanges(data)
        return data

    def keep_losses_off_exchanges(self, data: dict[str, Any]) -> None:
        """Drop the drawn exchanges whose cycle a message-losing fault hits while they run
        (LOSS_DURING_EXCHANGE), the last first, until none is hit; the scenario's own stay."""
        x = data.get("reconfigurations") or {}
        ops = x.get("operations", [])
        own = len(self.s.reconfigurations.operations)
        while len(ops) > own and losses_during_exchanges(self.s, data):
            for i in range(len(ops) - 1, own - 1, -1):
                trial = {**data, "reconfigurations": {**x, "operations": ops[:i] + ops[i + 1:]}}
                if len(losses_during_exchanges(self.s, trial)) < len(
                        losses_during_exchanges(self.s, data)):
                    ops = ops[:i] + ops[i + 1:]
                    break
            else:
                ops = ops[:own]
            x["operations"] = ops
        if not ops:
            data.pop("reconfigurations", None)

    # ---- one fault --------------------------------------------------------------------------

    def duration(self) -> float:
        return round(self.rng.uniform(0.5, self.n.max_duration), 3)

    def link(self) -> list[str]:
        a, b = self.rng.choice(self.links)
        return [a, b]

    def fault(self, family: str, at: float) -> dict[str, Any] | None:
        rng = self.rng
        kind = rng.choice(FAMILIES[family])
        f: dict[str, Any] = {"kind": kind, "at": at}
        if kind == "corrupt":
            if not self.fields:
                return None
            name = rng.choice(self.fields)
            target = rng.choice(self.brokers)
            f.update(target=target, field=name, **self.state_value(name, target))
            if name == "table.clear" and rng.random() < 0.3 and len(self.brokers) > 2:
                others = [b for b in self.brokers if b != target]  # F13's cleared tables
                f["target"] = [target, *rng.sample(others, min(len(others), rng.randint(1, 3)))]
        elif kind == "clock":
            f["target"] = rng.choice(self.brokers)
        elif kind == "inject":
            msg = rng.choice(["sub", "unsub", "notify"])
            message: dict[str, Any] = {"type": msg}
            if msg != "notify":
                message["filter"] = rng.choice(["true", *self.filters])
            else:
                message["attributes"] = {"class": rng.randrange(20)}
            f.update(link=self.link(), message=message)
        elif kind in ("drop", "duplicate", "garble"):
            f.update(link=self.link(), probability=round(rng.uniform(0.2, 1.0), 2),
                     duration=self.duration())
        elif kind == "delay":
            dmax = self.s.params.delta_max * 1000
            f.update(link=self.link(), delay_ms=round(rng.uniform(dmax, 4 * dmax + 50), 1),
                     duration=self.duration())
        elif kind in ("cut", "flap"):
            f.update(link=self.link(), duration=self.duration())
        elif kind == "partition":
            top = rng.choice([b for b in self.brokers if b != self.root] or self.brokers)
            if top == self.root:
                return None
            f.update(target={"subtree": top}, duration=self.duration())
        elif kind in ("crash", "pause"):
            f.update(target=rng.choice(self.brokers), duration=self.duration())
        elif kind == "client_crash":
            if self.s.workload is not None and self.s.workload.subscriptions:
                f["clients"] = {"random": 1}
            else:
                f.update(target=rng.choice(self.brokers), filter=rng.choice(self.filters))
        return f

    def state_value(self, name: str, broker: str) -> dict[str, Any]:
        """`value` and `args` of a corrupt fault on `name` (entry.* faults without a value
        let the fault draw one from the broker's table when it strikes)."""
        rng = self.rng
        ids = [*self.brokers, "ghost"]
        own = self.neighbors[broker]
        colours = self.s.colours is not None
        table = {"table": rng.randrange(3)} if colours else {}
        if name in ("entry.insert", "adv.entry.insert"):
            # all-covering half the time: the worst bogus entry (F13)
            return {"value": {"sub_id": f"bogus{rng.randrange(1000)}",
                              "filter": "true" if rng.random() < 0.5 else
                              rng.choice(self.filters),
                              "dest": rng.choice([*own, "ghost"]), "flag": rng.randrange(2)},
                    "args": table}
        if name in ("table.clear", "adv.table.clear"):
            return {"args": table}
        if name.startswith(("entry.", "adv.entry.")):
            return {"args": table} if table else {}
        if name == "merger.loaned.insert":  # a loan on a filter held here, or on none
            return {"value": {"filter": rng.choice(self.filters),
                              "dest": rng.choice([*own, "ghost"])}}
        if name == "merger.insert":
            return {"value": {"filter": "true", "dest": rng.choice([*own, "ghost"]),
                              "constituents": self.filters[:3], "flag": 1}}
        if name == "rebuild_bit":
            return {"value": rng.randrange(2)}
        if name.startswith("skipring.") or name.startswith("optimize.") or \
                name in ("merger.clear", "merger.loaned.clear", "exchange.queue.clear",
                         "recolor.pending.clear", "colour.queue.clear"):
            return {}
        if name in ("overlay.neighbors", "exchange.gray_set", "exchange.queue_set",
                    "recolor.flags", "sketch.detached"):
            return {"value": rng.sample(ids, rng.randrange(min(len(ids), 4) + 1))}
        if name in ("overlay.neighbor.add",):
            return {"value": rng.choice(ids)}
        if name == "overlay.neighbor.remove":
            return {"value": rng.choice(own or ids)}
        if name in ("overlay.parent", "recolor.walk"):
            return {"value": rng.choice([None, *ids])}
        if name in ("exchange.locked", "exchange.color", "exchange.relaying",
                    "colour.joining", "recolor.leaving", "colour.holding", "sketch.suspended"):
            return {"value": rng.random() < 0.5}
        if name == "exchange.pointer":
            return {"value": rng.choice([None, *ids]), "args": {"name": rng.choice(POINTERS)}}
        if name == "exchange.rid":
            return {"value": rng.choice([None, f"bogus{rng.randrange(100)}"])}
        if name in ("colour.c_old", "colour.c_cur", "colour.c_new"):
            return {"value": rng.randrange(3)}
        if name in ("colour.parent", "colour.children", "colour.child.add",
                    "colour.child.remove"):
            args = {"colour": rng.randrange(3)}
            if name == "colour.parent":
                return {"value": rng.choice([None, *ids]), "args": args}
            if name == "colour.children":
                return {"value": rng.sample(ids, rng.randrange(min(len(ids), 4) + 1)),
                        "args": args}
            return {"value": rng.choice(own or ids), "args": args}
        if name == "sketch.bits":
            return {"value": rng.randint(1, 16)}
        if name == "sketch.round":
            return {"value": rng.randrange(100)}
        return {}

    # ---- reconfigurations -------------------------------------------------------------------

    def reconfigure(self, data: dict[str, Any], times: list[float]) -> None:
        """Random link exchanges at `times` (the coloured overlay: recolours to the tree they
        make), on the tree the scenario's own operations leave, checked like the scenario's."""
        x = data.setdefault("reconfigurations", {})
        ops = x.setdefault("operations", [])
        tree = PlanTree.of(self.links, self.brokers)
        coloured = self.s.colours is not None
        d = self.s.params.d
        for at in times:
            for _ in range(10):  # an exchange that would stretch the tree past d is drawn again
                op = random_exchange(tree, self.rng)
                after = apply(tree, op)
                if _diameter(after) <= d:
                    break
            else:
                continue
            tree = after
            if coloured:
                ops.append({"op": "move_to", "edges": sorted([list(e) for e in after.edges]),
                            "at": at})
            else:
                ops.append({"op": "exchange", "remove": list(op.remove), "add": list(op.add),
                            "at": at})
        if not ops:
            data.pop("reconfigurations")


def _diameter(tree: PlanTree) -> int:
    from weeble.model.topology import from_edges

    return from_edges(sorted(tree.edges)).diameter() if tree.edges else 0


def draw(scenario: Scenario, seed: int, nemesis: Nemesis | None = None) -> dict[str, Any]:
    """The data of `scenario` under seed `seed` with a random nemesis (see the module's doc).
    A drawn schedule the scenario's checks refuse (a reconfiguration the tree no longer
    allows) is drawn again from the next stream, up to 20 times."""
    nemesis = nemesis or Nemesis()
    last: Exception | None = None
    for attempt in range(20):
        d = _Draw(scenario, seed * 1000 + attempt, nemesis)
        data = d.scenario(seed)
        try:
            parse_scenario(data, source=f"{scenario.name} seed {seed}")
        except ValueError as exc:
            last = exc
            continue
        return data
    raise NemesisError(f"{scenario.name}: no valid nemesis schedule for seed {seed}: {last}")


__all__ = ["DEFAULT_MIX", "FAMILIES", "LOSING", "LOSS_DURING_EXCHANGE", "OUTSIDE_ON_STATIC",
           "FaultModel", "Nemesis", "NemesisError", "draw", "exchange_span", "fault_model",
           "losses_during_exchanges", "parse_mix", "targets_of", "window"]
