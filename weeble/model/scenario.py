"""The scenario file: one YAML schema for simulated and live runs, validated with clear errors.

`load_scenario(path)` either returns a `Scenario` whose topology is a tree, whose timing satisfies
the algorithm's stabilization precondition, whose filters parse and whose faults and
subscriptions name existing brokers — or raises `ScenarioError` with the file, the field path
(`routing.algorithm`, `faults[2].target`) and the problem. Users never see a traceback.

Example (every field that has a default may be left out):

    name: sim-small
    seed: 7
    duration: 300            # virtual seconds
    topology: {kind: kary, m: 3, levels: 3}
    routing: {algorithm: identity, hierarchical: true}
    timing: {pi: 30.2, rho: 30, delta_min: 0.025, delta_max: 0.025, delay: constant}
    workload: {filter_classes: 20, subscriptions: 200, mean_lifetime: 120, publish_rate: 50}
    subscriptions:
      - {client: alice, broker: b4, filter: "class == 3", start: 5, end: 250}
    publications:
      - {at: 100, broker: b12, attributes: {class: 3}}
    faults:
      - {at: 100, kind: corrupt, target: b1, field: clock, value: 0}
      - {at: 120, kind: drop, link: [b0, b1], probability: 0.5, duration: 10}
      - {at: 150, kind: crash, target: "random:2"}
    trace: {sends: false, snapshots_every: null}
    check_every: 1.0
    live: {base_host: 127.0.0.2, listen_port: 7000, tls: false}   # live runs only
    chaos:                   # a chaos experiment (weeble/model/experiment.py), live and sim
      faults:
        - {kind: cut, link: [b0, b1], at: 60, duration: 5}
"""

from __future__ import annotations

import ipaddress
import re
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from weeble.broker.core.corruption import TARGETS as CORRUPT_TARGETS
from weeble.broker.core.filters import Filter, FilterSyntaxError
from weeble.broker.core.rom import Algorithm, ConfigError, Options, Params
from weeble.model import topology as topo
from weeble.model.experiment import Experiment, ExperimentError, tree_of_scenario
from weeble.model.topology import Topology


class ScenarioError(ValueError):
    """A scenario the user must fix; the message says where and what."""


class _Model(BaseModel):
    # Unknown keys are almost always typos; silently ignoring them would run the wrong experiment.
    model_config = ConfigDict(extra="forbid", frozen=True)


# ---- topology -------------------------------------------------------------------------------


class KaryTopology(_Model):
    kind: Literal["kary"]
    m: int = Field(ge=1)
    levels: int = Field(ge=1)

    def build(self, seed: int) -> Topology:
        return topo.kary_tree(self.m, self.levels)


class RandomTopology(_Model):
    kind: Literal["random"]
    brokers: int = Field(ge=1)
    seed: int | None = None  # default: the scenario seed

    def build(self, seed: int) -> Topology:
        return topo.random_tree(self.brokers, self.seed if self.seed is not None else seed)


class EdgesTopology(_Model):
    kind: Literal["edges"]
    edges: list[tuple[str, str]] = Field(min_length=1)

    def build(self, seed: int) -> Topology:
        return topo.from_edges(self.edges)


class ChainTopology(_Model):
    kind: Literal["chain"]
    brokers: int = Field(ge=1)

    def build(self, seed: int) -> Topology:
        return topo.chain(self.brokers)


TopologySpec = Annotated[
    KaryTopology | RandomTopology | EdgesTopology | ChainTopology, Field(discriminator="kind")
]

# ---- routing and timing ---------------------------------------------------------------------


class Routing(_Model):
    algorithm: Algorithm
    hierarchical: bool = False
    wrapper: bool = False
    flag_rule: bool = True  # False reproduces the non-self-stabilizing original (claim 4)
    unsub_counts_all: bool = True


class Timing(_Model):
    pi: float
    rho: float
    delta_min: float
    delta_max: float
    # constant: always delta_max. uniform: in [delta_min, delta_max]. adversarial: within the
    # bounds, chosen to widen the refresh gap of spec Fig. 3.1 (see sim/engine.py).
    delay: Literal["constant", "uniform", "adversarial"] = "constant"
    d: int | None = None  # default: the topology's diameter


# ---- clients --------------------------------------------------------------------------------


class Workload(_Model):
    """The randomized workload of spec §4.1 (see sim/workload.py)."""

    filter_classes: int = Field(ge=1)
    subscriptions: int = Field(ge=0)  # N_s, the equilibrium number of live subscriptions
    mean_lifetime: float = Field(gt=0)
    publish_rate: float = Field(ge=0)  # ω, notifications per second over the whole system
    subscriber_placement: Literal["leaves", "all"] = "leaves"
    publisher_placement: Literal["leaves", "all", "root"] = "leaves"
    # Fraction of subscribers that end by crashing (no unsubscription, refreshes stop) (F12).
    subscribers_crash: float = Field(default=0.0, ge=0, le=1)


class Subscription(_Model):
    client: str
    broker: str
    filter: str
    start: float = Field(default=0.0, ge=0)
    end: float | None = None  # None: until the end of the run


class Publication(_Model):
    at: float = Field(ge=0)
    broker: str
    attributes: dict[str, int | float | str | bool]
    client: str | None = None  # default: p<broker>, the workload's publisher at that broker


# ---- faults ---------------------------------------------------------------------------------

# "all", "random:k", or a broker id (for crash: a client id, or "random:k" live subscribers)
Target = str
_RANDOM = re.compile(r"random:(\d+)$")
_WORKLOAD_CLIENT = re.compile(r"c\d+")


class CorruptFault(_Model):
    """A transient state fault delivered as core `Corrupt(field, value, args)` to each target."""

    at: float = Field(ge=0)
    kind: Literal["corrupt"]
    target: Target
    field: str  # the Corrupt target: which RAM field (see broker/core/corruption.py)
    value: Any = None
    args: dict[str, Any] = {}


class _LinkFault(_Model):
    """A link misbehaves for `duration` s: on `link`, or on every link of the `target` brokers."""

    at: float = Field(ge=0)
    duration: float = Field(gt=0)
    link: tuple[str, str] | None = None
    target: Target | None = None


class DropFault(_LinkFault):
    kind: Literal["drop"]
    probability: float = Field(default=1.0, ge=0, le=1)


class DuplicateFault(_LinkFault):
    kind: Literal["duplicate"]
    probability: float = Field(default=1.0, ge=0, le=1)


class DelayFault(_LinkFault):
    kind: Literal["delay"]
    delay: float = Field(ge=0)  # seconds; outside [delta_min, delta_max] this is fault F11


class CrashFault(_Model):
    """A client stops refreshing without unsubscribing (F12)."""

    at: float = Field(ge=0)
    kind: Literal["crash"]
    target: Target


Fault = Annotated[
    CorruptFault | DropFault | DuplicateFault | DelayFault | CrashFault,
    Field(discriminator="kind"),
]
LinkFault = DropFault | DuplicateFault | DelayFault


def fault_end(fault: CorruptFault | LinkFault | CrashFault) -> float:
    """State faults and crashes are instantaneous; link faults last `duration`."""
    if isinstance(fault, CorruptFault | CrashFault):
        return fault.at
    return fault.at + fault.duration


# ---- the scenario ---------------------------------------------------------------------------


class Trace(_Model):
    enabled: bool = True  # False: summary.json only (the large runs, where traces reach GBs)
    sends: bool = False  # also trace every inter-broker send and receive
    snapshots_every: float | None = Field(default=None, gt=0)


class LiveLinks(_Model):
    """Initial user-space shaping of every broker-to-broker link (both directions)."""

    delay_ms: float = Field(default=0.0, ge=0)
    jitter_ms: float = Field(default=0.0, ge=0)
    loss: float = Field(default=0.0, ge=0, le=1)
    duplicate: float = Field(default=0.0, ge=0, le=1)


class Live(_Model):
    """Live runs only (`weeble up`, `weeble run`); the simulator ignores this block.

    Broker i (in topology order) gets its own loopback address `base_host + i`, and on it the
    three ports below, so every broker of a run has the same, predictable port numbers.
    """

    base_host: str = "127.0.0.2"
    listen_port: int = Field(default=7000, ge=0, le=65535)  # links + clients; 0: any free port
    admin_port: int = Field(default=7001, ge=0, le=65535)  # management (admin, health)
    metrics_port: int | None = Field(default=9100, ge=0, le=65535)  # None: no /metrics
    tls: bool = False  # admin over TLS with per-run certificates and client authentication
    # Link messages already waiting when a link can write leave together as one Batch, up to
    # this many (bounded in bytes too; nothing is held back to fill one). 1: never batch.
    link_batch: int = Field(default=64, ge=1)
    links: LiveLinks = LiveLinks()
    # The workload is bounded in count as well as in time (DESIGN.md, "Network emulation").
    max_subscriptions: int = Field(default=1000, ge=0)
    max_publications: int = Field(default=100_000, ge=0)
    startup_timeout: float = Field(default=30.0, gt=0)
    drain: float = Field(default=1.0, ge=0)  # seconds a stopping broker drains its link queues


class Scenario(_Model):
    name: str
    seed: int = 0
    duration: float = Field(gt=0)
    topology: TopologySpec
    root: str | None = None  # default: the first broker
    routing: Routing
    timing: Timing
    workload: Workload | None = None
    subscriptions: list[Subscription] = []
    publications: list[Publication] = []
    faults: list[Fault] = []
    trace: Trace = Trace()
    # where a live run puts its brokers (weeble/orchestrator/backend.py BACKEND_KINDS)
    backend: Literal["local", "mininet", "docker", "k8s"] = "local"
    live: Live = Live()
    check_every: float | None = Field(default=1.0, gt=0)  # None: no legitimacy checks
    # A chaos experiment run alongside the workload (t = 0 at the workload's start): applied by
    # `weeble run` live and by `weeble simulate` in virtual time.
    chaos: Experiment | None = None

    _built: tuple[object, Topology] | None = PrivateAttr(default=None)

    def build_topology(self) -> Topology:
        """The validated broker tree (built once, and again if a model_copy changed its inputs)."""
        key = (self.topology, self.seed)
        if self._built is None or self._built[0] != key:
            t = self.topology.build(self.seed)
            t.validate_tree()
            self._built = (key, t)
        return self._built[1]

    @property
    def root_broker(self) -> str:
        return self.root if self.root is not None else self.build_topology().brokers[0]

    @property
    def params(self) -> Params:
        t = self.timing
        d = t.d if t.d is not None else self.build_topology().diameter()
        return Params(t.pi, t.rho, t.delta_min, t.delta_max, d)

    @property
    def options(self) -> Options:
        return Options(self.routing.flag_rule, self.routing.unsub_counts_all)

    @property
    def bound(self) -> float:
        """Δ, the worst-case stabilization time of the configured algorithm."""
        return self.params.bound(self.routing.algorithm, self.routing.wrapper)

    @property
    def last_fault_end(self) -> float:
        """When the last fault ends; 0 without faults (the empty start state is legitimate)."""
        chaos = [] if self.chaos is None else [
            inj.end if inj.end is not None else inj.start
            for inj in self.chaos.timeline(until=self.duration)]
        return max([*(fault_end(f) for f in self.faults), *chaos], default=0.0)


# ---- loading --------------------------------------------------------------------------------


def load_scenario(path: str | Path) -> Scenario:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such file") from None
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(f"{where}: YAML syntax error: {problem}") from None
    return parse_scenario(data, source=str(path))


def parse_scenario(data: object, source: str = "<scenario>") -> Scenario:
    """Validate an already-parsed YAML document."""
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: expected a mapping of scenario fields at the top level")
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        lines = [_describe(err) for err in exc.errors()]
        if len(lines) > 10:
            lines = [*lines[:10], f"... and {len(lines) - 10} more"]
        raise ScenarioError(f"{source}: " + "\n  ".join(lines)) from None
    try:
        _check(scenario)
    except _Invalid as exc:
        raise ScenarioError(f"{source}: {exc.path}: {exc.problem}") from None
    return scenario


class _Invalid(Exception):
    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path, self.problem = path, problem


def _check(s: Scenario) -> None:
    """The checks that need more than one field: tree shape, timing, filters, names."""
    try:
        t = s.build_topology()
    except ConfigError as exc:
        raise _Invalid("topology", str(exc)) from None
    brokers = set(t.brokers)

    def known(path: str, broker: str) -> None:
        if broker not in brokers:
            raise _Invalid(path, f"unknown broker {broker!r} (brokers: {_listing(t.brokers)})")

    if s.root is not None:
        known("root", s.root)
    _check_live(s.live, len(t.brokers))
    try:
        s.params.validate(s.routing.algorithm, s.routing.wrapper)
    except ConfigError as exc:
        # Params names the field first ("pi: needs ..."): put it under `timing.`
        field, _, problem = str(exc).partition(": ")
        raise _Invalid(f"timing.{field}", problem) from None

    for i, sub in enumerate(s.subscriptions):
        known(f"subscriptions[{i}].broker", sub.broker)
        if sub.client in brokers:  # a broker would take it for a neighbour's message
            raise _Invalid(f"subscriptions[{i}].client", f"{sub.client!r} is a broker id")
        if _WORKLOAD_CLIENT.fullmatch(sub.client) or sub.client in {f"p{b}" for b in brokers}:
            raise _Invalid(f"subscriptions[{i}].client",
                           f"{sub.client!r} is reserved for workload clients (c<n>, p<broker>)")
        try:
            Filter.parse(sub.filter)
        except FilterSyntaxError as exc:
            raise _Invalid(f"subscriptions[{i}].filter", f"{sub.filter!r}: {exc}") from None
        if sub.end is not None and sub.end <= sub.start:
            raise _Invalid(f"subscriptions[{i}].end", f"{sub.end} is not after start {sub.start}")
    for i, pub in enumerate(s.publications):
        known(f"publications[{i}].broker", pub.broker)
        if pub.client in brokers:
            raise _Invalid(f"publications[{i}].client", f"{pub.client!r} is a broker id")

    if s.chaos is not None:
        try:
            s.chaos.check(tree_of_scenario(s), s.params, until=s.duration)
        except ExperimentError as exc:
            raise _Invalid(f"chaos.{exc.path}", exc.problem) from None

    clients = {sub.client for sub in s.subscriptions}
    for i, fault in enumerate(s.faults):
        where = f"faults[{i}]"
        if fault.at > s.duration:
            raise _Invalid(f"{where}.at", f"{fault.at} is after the end of the run ({s.duration})")
        if isinstance(fault, CrashFault):
            m = _RANDOM.match(fault.target)
            if m is None and fault.target not in clients:
                raise _Invalid(
                    f"{where}.target",
                    f"unknown client {fault.target!r}: name a client of `subscriptions` or"
                    " use random:k (k live subscribers)",
                )
            continue
        if isinstance(fault, CorruptFault):
            _check_target(f"{where}.target", fault.target, t.brokers)
            if fault.field not in CORRUPT_TARGETS:
                raise _Invalid(f"{where}.field", f"unknown RAM field {fault.field!r}"
                               f" (valid: {', '.join(CORRUPT_TARGETS)})")
            continue
        if (fault.link is None) == (fault.target is None):
            raise _Invalid(where, "a link fault needs exactly one of `link: [a, b]` or `target`")
        if fault.link is not None:
            a, b = fault.link
            known(f"{where}.link", a)
            known(f"{where}.link", b)
            if b not in t.neighbors(a):
                raise _Invalid(f"{where}.link", f"{a} and {b} are not neighbours")
        else:
            _check_target(f"{where}.target", fault.target or "", t.brokers)


def _check_live(live: Live, brokers: int) -> None:
    # Live brokers listen on loopback only: a typo must not aim traffic at a real network.
    try:
        base = ipaddress.IPv4Address(live.base_host)
    except ValueError:
        raise _Invalid("live.base_host", f"{live.base_host!r} is not an IPv4 address") from None
    last = base + (brokers - 1) if int(base) + brokers - 1 <= 0xFFFFFFFF else None
    if not base.is_loopback or last is None or not last.is_loopback:
        raise _Invalid("live.base_host", f"{base}: {brokers} brokers need {brokers} addresses"
                       " inside 127.0.0.0/8 from here")
    ports = {"listen_port": live.listen_port, "admin_port": live.admin_port,
             "metrics_port": live.metrics_port}
    seen: dict[int, str] = {}
    for name, port in ports.items():
        if port:
            if port in seen:
                raise _Invalid(f"live.{name}", f"port {port} is also live.{seen[port]}")
            seen[port] = name


def _check_target(path: str, target: str, brokers: tuple[str, ...]) -> None:
    if target == "all":
        return
    m = _RANDOM.match(target)
    if m is not None:
        if not 1 <= int(m.group(1)) <= len(brokers):
            raise _Invalid(path, f"{target}: k must be between 1 and {len(brokers)}")
        return
    if target not in brokers:
        raise _Invalid(
            path,
            f"unknown broker {target!r}: name a broker ({_listing(brokers)}), all, or random:k",
        )


def _listing(names: tuple[str, ...]) -> str:
    return ", ".join(names) if len(names) <= 8 else f"{', '.join(names[:6])}, ... {names[-1]}"


# ---- pydantic errors as "field.path: problem" -----------------------------------------------

def _describe(err: Any) -> str:
    loc: tuple[str | int, ...] = tuple(err["loc"])
    path, model = _resolve(loc)
    if err["type"] == "extra_forbidden":
        valid = f" (valid fields: {', '.join(model.model_fields)})" if model else ""
        return f"{path}: unknown field{valid}"
    if err["type"] in ("union_tag_invalid", "union_tag_not_found"):
        return f"{path}.kind: {err['msg']}"
    if err["type"] == "missing":
        return f"{path}: required field missing"
    return f"{path}: {err['msg']}"


def _resolve(loc: tuple[str | int, ...]) -> tuple[str, type[BaseModel] | None]:
    """Readable path for a pydantic location, without the union tags pydantic inserts
    (`topology.kary.m` -> `topology.m`), plus the model owning the last component."""
    parts: list[str] = []
    current: Any = Scenario
    owner: type[BaseModel] | None = None
    for part in loc:
        current = _unwrap(current)
        if isinstance(part, int):
            parts.append(f"[{part}]")
            args = typing.get_args(current)
            current = args[0] if args else None
            continue
        members = _union_members(current)
        if members is not None:  # pydantic put the discriminator's value here: skip it
            current = next((m for m in members if _tag(m) == part), None)
            continue
        if isinstance(current, type) and issubclass(current, BaseModel):
            owner = current
            field = current.model_fields.get(part)
            current = field.annotation if field else None
        else:
            owner, current = None, None
        parts.append(f".{part}" if parts else part)
    return "".join(parts).lstrip(".") or "(top level)", owner


def _unwrap(tp: Any) -> Any:
    """Strip Annotated and `X | None` down to the interesting type."""
    while True:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp


def _union_members(tp: Any) -> tuple[Any, ...] | None:
    if typing.get_origin(tp) in (Union, types.UnionType):
        members = typing.get_args(tp)
        if all(_tag(m) is not None for m in members):
            return members
    return None


def _tag(model: Any) -> str | None:
    if isinstance(model, type) and issubclass(model, BaseModel) and "kind" in model.model_fields:
        args = typing.get_args(model.model_fields["kind"].annotation)
        return args[0] if args else None
    return None
