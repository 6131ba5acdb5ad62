"""The run header: the first record of a run (`kind: run`, in `RUN/trace/run.jsonl`).

It says what ran (scenario, algorithm and options, the timing constants π, ρ, δmin, δmax, d and
the bound Δ, the broker tree, the seed, the backend, the software versions) so that a checker
needs nothing but the trace directory. The grey zones of the correctness rules
(`weeble.check.rules`) are functions of these constants; they are defined here, once.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import Any

from weeble.core.rom import (
    Algorithm,
    AntiEntropy,
    ConfigError,
    Options,
    Params,
    SkipRing,
    leased_like,
    run_bound,
)
from weeble.trace.schema import VERSION

# The run-level fields of the header, in the order they are written.
RUN_FIELDS = ("scenario", "algorithm", "hierarchical", "wrapper", "options", "pi", "rho",
              "delta_min", "delta_max", "d", "bound", "topology", "seed", "backend", "clock",
              "versions", "duration", "snapshot_period", "check_period", "run_id", "adverts",
              "ordering", "overlay", "overlay_bound", "reconfigured", "recolor_period", "mode",
              "anti_entropy", "skip_ring")


class HeaderError(ValueError):
    """A run header that is missing or does not make sense; the message says which field."""


def versions() -> dict[str, str]:
    try:
        weeble = metadata.version("weeble")
    except metadata.PackageNotFoundError:  # running from a source tree without install
        weeble = "unknown"
    return {"weeble": weeble, "trace": str(VERSION), "python": platform.python_version()}


@dataclass(frozen=True, slots=True)
class Topology:
    """The broker tree: brokers, undirected links, the root."""

    brokers: tuple[str, ...]
    links: tuple[tuple[str, str], ...]
    root: str

    def as_json(self) -> dict[str, Any]:
        return {"brokers": list(self.brokers), "links": [list(link) for link in self.links],
                "root": self.root}

    @classmethod
    def from_json(cls, data: Any) -> Topology:
        if not isinstance(data, dict):
            raise HeaderError("topology: not a JSON object")
        try:
            links = tuple((str(a), str(b)) for a, b in data["links"])
            return cls(tuple(map(str, data["brokers"])), links, str(data["root"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise HeaderError(f"topology: {exc!r}") from None

    def hops(self) -> dict[str, dict[str, int]]:
        """Hop distance between every pair of brokers (BFS from each; trees are small)."""
        adjacent: dict[str, list[str]] = {b: [] for b in self.brokers}
        for a, b in self.links:
            adjacent.setdefault(a, []).append(b)
            adjacent.setdefault(b, []).append(a)
        out: dict[str, dict[str, int]] = {}
        for src in adjacent:
            dist = {src: 0}
            frontier = [src]
            while frontier:
                nxt = []
                for x in frontier:
                    for y in adjacent[x]:
                        if y not in dist:
                            dist[y] = dist[x] + 1
                            nxt.append(y)
                frontier = nxt
            out[src] = dist
        return out


@dataclass(frozen=True, slots=True)
class RunHeader:
    scenario: str
    algorithm: Algorithm
    hierarchical: bool
    wrapper: bool
    params: Params
    topology: Topology
    seed: int
    backend: str  # "sim", "local", "mininet", "docker", "kubernetes"
    clock: str  # "virtual" (simulator, t from 0) or "wall" (live, Unix epoch)
    options: Options = field(default_factory=Options)
    duration: float | None = None  # planned seconds of the run
    snapshot_period: float | None = None  # s between snapshot rounds (None: no snapshots)
    check_period: float | None = None  # s between the simulator's legitimacy checks
    run_id: str | None = None
    versions: dict[str, str] = field(default_factory=versions)
    # Chapter 4: advertisements double Δ; `ordering` is the order reconfigurations keep
    # (R15 counts causal violations under "causal"); a coloured overlay has its own bound ∆r.
    adverts: bool = False
    ordering: str = "fifo"
    overlay: str = "static"
    overlay_bound: float | None = None
    reconfigured: bool = False  # the tree changes during the run: `topology` is the first one
    recolor_period: float | None = None  # ξ of the coloured overlay
    # Issue 14: how routing tables are kept correct, and the anti-entropy mode's ROM (its Δ)
    mode: str = "leasing"
    anti_entropy: AntiEntropy | None = None
    # mode skip_ring: its periods {interval, supervisor_interval} set its windows (`sr_*`
    # below) in place of the tree's d·δmax
    skip_ring: dict[str, float] | None = None

    # ---- the constants of the correctness rules (weeble.check.rules explains each) ----

    # ---- mode skip_ring (seed 003): the windows of a topic overlay beside the tree ----

    @property
    def sr_levels(self) -> int:
        return SkipRing.levels(len(self.topology.brokers))

    @property
    def sr_interval(self) -> float:
        assert self.skip_ring is not None
        return float(self.skip_ring["interval"])

    @property
    def sr_bound(self) -> float:
        """Δ of the skip ring (core SkipRing.bound)."""
        sr = SkipRing(interval=self.sr_interval,
                      supervisor_interval=float(self.skip_ring["supervisor_interval"]))  # type: ignore[index]
        return sr.bound(self.params, len(self.topology.brokers))

    @property
    def bound(self) -> float:
        """Δ: the algorithm's worst-case stabilization time (core Params.bound); with a
        coloured overlay, ∆r (Eq. 4.3) when it is longer; the skip ring's in mode skip_ring."""
        if self.skip_ring is not None:
            return self.sr_bound
        if self.anti_entropy is not None:
            routing = self.anti_entropy.bound(self.params)
        else:
            routing = self.params.bound(self.algorithm, self.wrapper, self.adverts)
        return run_bound(routing, self.overlay_bound)

    @property
    def path(self) -> float:
        """d·δmax: the longest a legal message journey through the tree takes. Mode skip_ring:
        a flooded publication crosses ≤ ⌈log₂ n⌉ ring hops after ≤ 2 to reach the ring (the
        supervisor's hand-off), and anti-entropy repairs what flooding missed within about
        two member intervals (spec seed23 §C.1-13): (⌈log₂ n⌉ + 2)·δmax + 2·interval."""
        if self.skip_ring is not None:
            return (self.sr_levels + 2) * self.params.delta_max + 2 * self.sr_interval
        return self.params.d * self.params.delta_max

    def path_hops(self) -> Mapping[str, Mapping[str, float]]:
        """The hops of the path rule R13(d) between brokers: in the tree of `topology`, or d
        (which bounds every tree's diameter) when reconfigurations change the tree; in the
        skip-ring mode `path` in units of δmax (a float)."""
        hops = self.topology.hops()
        if self.skip_ring is not None:  # not the tree: any delivery within `path`
            ring = self.path / self.params.delta_max
            return {a: dict.fromkeys(others, ring) for a, others in hops.items()}
        if self.reconfigured:
            return {a: dict.fromkeys(others, self.params.d) for a, others in hops.items()}
        return hops

    @property
    def switch(self) -> float:
        """2ξ with the coloured overlay (else 0): a (un)subscription goes into the tables of
        the colour being prepared, which notifications use from the recolor after next."""
        return 0.0 if self.recolor_period is None else 2 * self.recolor_period

    @property
    def activation(self) -> float:
        """A = d·δmax + ρ (+ 2ξ): a subscription must be served once it is this old. Mode
        skip_ring: a broker that joins a topic is in its ring a few intervals later (its
        Config, the introductions, the shortcuts: ⌈log₂ n⌉ + 2 intervals), then as above."""
        if self.skip_ring is not None:
            return self.path + self.params.rho + (self.sr_levels + 2) * self.sr_interval
        return self.path + self.params.rho + self.switch

    @property
    def deactivation(self) -> float:
        """D = d·δmax (+ 2ξ): a subscription must get a publication if it lives this long after
        it, and may get deliveries up to this long after it ended."""
        return self.path + self.switch

    @property
    def crash_linger(self) -> float:
        """L = 2π + d·δmax (+ 2ξ): deliveries to a crashed client are allowed this long after
        its crash (its lease lingers, fault F12)."""
        return 2 * self.params.pi + self.path + self.switch

    @property
    def settle(self) -> float:
        """A subscription is required in the routing tables once it is d·δmax (+ 2ξ) old. Mode
        skip_ring: its broker's place in SR(n), with every shortcut, once the join has settled
        (the activation time)."""
        if self.skip_ring is not None:
            return self.activation
        return self.path + self.switch

    @property
    def linger(self) -> float:
        """An ended subscription may stay in the tables up to 2π + d·δmax (+ 2ξ). Mode
        skip_ring: the leave (the supervisor's grant) and the relabelling it causes settle
        like a join."""
        if self.skip_ring is not None:
            return 2 * self.params.pi + self.activation
        return 2 * self.params.pi + self.path + self.switch

    @classmethod
    def of_scenario(cls, scenario: Any, *, backend: str, clock: str,
                    duration: float | None = None, snapshot_period: float | None = None,
                    run_id: str | None = None) -> RunHeader:
        """The header of a run of `scenario` (a weeble Scenario: name, routing, params,
        options, seed, build_topology(), root_broker, duration, check_every)."""
        topology = scenario.build_topology()
        r = scenario.routing
        colours = scenario.colours
        return cls(
            scenario=scenario.name, algorithm=r.algorithm, hierarchical=r.hierarchical,
            wrapper=r.wrapper, params=scenario.params, options=scenario.options,
            topology=Topology(tuple(topology.brokers), tuple(tuple(x) for x in topology.links),
                              scenario.root_broker),
            seed=scenario.seed, backend=backend, clock=clock,
            duration=scenario.duration if duration is None else duration,
            snapshot_period=snapshot_period,
            check_period=scenario.check_every if backend == "sim" else None, run_id=run_id,
            adverts=r.adverts, ordering=str(scenario.reconfigurations.ordering),
            overlay=str(scenario.overlay.kind),
            overlay_bound=None if colours is None else colours.bound(scenario.params),
            reconfigured=(bool(scenario.reconfigurations.operations) or colours is not None
                          or (scenario.optimizer is not None
                              and scenario.optimizer.heuristic != "none")),
            recolor_period=None if colours is None else colours.xi,
            mode=str(scenario.mode),
            anti_entropy=(scenario.anti_entropy_rom if str(scenario.mode) == "anti_entropy"
                          else None),
            skip_ring=_skip_ring_periods(scenario))

    # ---- record <-> header ----

    def fields(self) -> dict[str, Any]:
        """The fields of the `run` record."""
        p = self.params
        out: dict[str, Any] = {
            "scenario": self.scenario, "algorithm": self.algorithm.value,
            "hierarchical": self.hierarchical, "wrapper": self.wrapper,
            "options": asdict(self.options),
            "pi": p.pi, "rho": p.rho, "delta_min": p.delta_min, "delta_max": p.delta_max,
            "d": p.d, "bound": self.bound, "topology": self.topology.as_json(),
            "seed": self.seed, "backend": self.backend, "clock": self.clock,
            "versions": dict(self.versions),
        }
        for name in ("duration", "snapshot_period", "check_period", "run_id", "overlay_bound",
                     "recolor_period"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.adverts:
            out["adverts"] = True
        if self.reconfigured:
            out["reconfigured"] = True
        if self.ordering != "fifo":
            out["ordering"] = self.ordering
        if self.overlay != "static":
            out["overlay"] = self.overlay
        if self.mode != "leasing":
            out["mode"] = self.mode
        if self.anti_entropy is not None:
            out["anti_entropy"] = asdict(self.anti_entropy)
        if self.skip_ring is not None:
            out["skip_ring"] = dict(self.skip_ring)
        return out

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> RunHeader:
        """The header of a `run` record; HeaderError names a field that does not make sense."""
        try:
            algorithm = Algorithm(rec["algorithm"])
        except KeyError:
            raise HeaderError("run record lacks field 'algorithm'") from None
        except ValueError:
            raise HeaderError(f"algorithm: unknown {rec['algorithm']!r}") from None
        try:
            params = Params(pi=float(rec["pi"]), rho=float(rec["rho"]),
                            delta_min=float(rec["delta_min"]),
                            delta_max=float(rec["delta_max"]), d=int(rec["d"]))
            options = Options(**(rec.get("options") or {}))
            header = cls(
                scenario=str(rec["scenario"]), algorithm=algorithm,
                hierarchical=bool(rec["hierarchical"]), wrapper=bool(rec["wrapper"]),
                params=params, topology=Topology.from_json(rec["topology"]),
                seed=int(rec["seed"]), backend=str(rec["backend"]), clock=str(rec["clock"]),
                options=options, duration=_opt_float(rec.get("duration")),
                snapshot_period=_opt_float(rec.get("snapshot_period")),
                check_period=_opt_float(rec.get("check_period")),
                run_id=rec.get("run_id"), versions=dict(rec.get("versions") or {}),
                adverts=bool(rec.get("adverts", False)),
                ordering=str(rec.get("ordering", "fifo")),
                overlay=str(rec.get("overlay", "static")),
                overlay_bound=_opt_float(rec.get("overlay_bound")),
                reconfigured=bool(rec.get("reconfigured", False)),
                recolor_period=_opt_float(rec.get("recolor_period")),
                mode=str(rec.get("mode", "leasing")),
                anti_entropy=(AntiEntropy(**rec["anti_entropy"]) if rec.get("anti_entropy")
                              else None),
                skip_ring=_skip_ring_record(rec.get("skip_ring")))
            if header.anti_entropy is not None:
                header.anti_entropy.validate()
        except KeyError as exc:
            raise HeaderError(f"run record lacks field {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            raise HeaderError(f"run record: {exc}") from None
        try:
            params.validate(leased_like(algorithm, header.mode), header.wrapper)
        except ConfigError as exc:
            raise HeaderError(f"run record: {exc}") from None
        if header.clock not in ("virtual", "wall"):
            raise HeaderError(f"clock: 'virtual' or 'wall', got {header.clock!r}")
        return header


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _skip_ring_periods(scenario: Any) -> dict[str, float] | None:
    if str(getattr(scenario, "mode", "leasing")) != "skip_ring":
        return None
    sr = scenario.skip_ring_rom
    return {"interval": sr.interval, "supervisor_interval": sr.supervisor_interval}


def _skip_ring_record(value: Any) -> dict[str, float] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise HeaderError("skip_ring: not a JSON object")
    try:
        out = {k: float(value[k]) for k in ("interval", "supervisor_interval")}
    except (KeyError, TypeError, ValueError) as exc:
        raise HeaderError(f"skip_ring: {exc!r}") from None
    if min(out.values()) <= 0:
        raise HeaderError(f"skip_ring: periods must be > 0, got {out}")
    return out
