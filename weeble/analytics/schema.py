"""The trace schema (version 1), the run-directory layout and the run metadata contract.

This module is the one definition of what a trace record is. Both writers
(`weeble.broker.sim.trace` and `weeble.broker.runtime.trace`) produce JSON lines, one file per
node, each record

    {"v": 1, "t": <int ns>, "node": <id>, "kind": <kind>, ...fields of that kind}

`KINDS` lists, per kind, its required and optional fields with their types. Fields a kind does
not list are not ingested. A record of a kind not listed here is kept (counted in the ingest
report) but no job reads it.

Canonical names. The v1 writers disagree on a few names (see `ALIASES`); the reader fills a
missing canonical field from its alias, so traces of both writers read the same. Each alias is a
mismatch to remove from a writer, not a second spelling to keep.

Client events (publish, deliver, subscribe, refresh, unsubscribe, crash) name both the client and
the broker it is attached to. The simulator files them under the broker with `node` = client;
the live runtime writes them itself with `node` = broker. Either way the canonical record has
both `client` and `broker`.

Times: `t` is integer nanoseconds, virtual time from 0 in the simulator, wall clock (Unix epoch)
live. The jobs work in seconds since the run's origin (`RunMeta.t0_ns`).

Run directory:

    RUN/trace/*.jsonl        node traces (both writers)
    RUN/summary.json         simulated runs (written by weeble.broker.sim.run)
    RUN/run.json             live runs: the metadata contract `RUN_JSON_EXAMPLE` below
    RUN/analysis/            written by `weeble analyze RUN`
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from weeble.broker.core.rom import Algorithm, ConfigError, Params

VERSION = 1
SUPPORTED_VERSIONS = frozenset({VERSION})


class AnalyticsError(Exception):
    """Bad input the user can fix (a missing run, a trace we cannot read): no traceback."""


class TraceVersionError(AnalyticsError):
    pass


class TraceFormatError(AnalyticsError):
    pass


class RunDirError(AnalyticsError):
    pass


class Type(StrEnum):
    STR = "str"
    INT = "int"
    FLOAT = "float"  # an int is accepted where a float is expected (JSON does not tell them)
    BOOL = "bool"
    STR_LIST = "str_list"
    JSON = "json"  # any JSON value; ingested as its JSON text


@dataclass(frozen=True, slots=True)
class Kind:
    name: str
    doc: str
    required: Mapping[str, Type] = field(default_factory=dict)
    optional: Mapping[str, Type] = field(default_factory=dict)

    @property
    def fields(self) -> dict[str, Type]:
        return {**self.required, **self.optional}


HEADER: Mapping[str, Type] = {"v": Type.INT, "t": Type.INT, "node": Type.STR, "kind": Type.STR}

S, N, F, B, L, J = Type.STR, Type.INT, Type.FLOAT, Type.BOOL, Type.STR_LIST, Type.JSON

_MESSAGE_IDS = {"nid": S, "publisher": S, "seq": N, "sub_id": S, "filter": S, "tag": N,
                "lseq": N}
# type: the fault's kind (corrupt, crash, drop, inject, ...); target: what it hit (a broker,
# client or link id); field: for a state fault, the RAM field (core Corrupt.target); links, link,
# sub_id, broker and the message ids narrow it down.
_FAULT = {"type": S, "target": S, "field": S, "broker": S, "sub_id": S, "links": L, "link": S,
          "value": J, "args": J, "source": S, "msg": S, "nid": S, "publisher": S, "seq": N}

_KIND_LIST = [
    # ---- clients (service level: what the oracle judges) ----
    Kind("publish", "a client published notification (publisher, seq)",
         {"client": S, "broker": S, "publisher": S, "seq": N, "attributes": J},
         {"nid": S, "published_at": F}),
    Kind("deliver", "a broker handed notification (publisher, seq) to a local client",
         {"client": S, "broker": S, "publisher": S, "seq": N},
         {"nid": S, "sub_id": S, "latency": F, "published_at": F}),
    Kind("subscribe", "a client subscription starts (first request for this sub_id)",
         {"client": S, "broker": S, "sub_id": S, "filter": S}, {"rpc": S}),
    Kind("refresh", "a client renews its subscription (SC-4)",
         {"client": S, "broker": S, "sub_id": S}, {"filter": S, "rpc": S}),
    Kind("unsubscribe", "a client ends its subscription",
         {"client": S, "broker": S, "sub_id": S}, {"filter": S}),
    Kind("crash", "a client goes silent without unsubscribing (F12); no sub_id: all of its "
         "subscriptions", {"client": S, "broker": S}, {"sub_id": S}),
    # ---- links (message overhead) ----
    Kind("send", "node sent a message to neighbour `to`; `fate`: what the link did with it",
         {"to": S, "msg": S}, {"from": S, "fate": S, **_MESSAGE_IDS}),
    Kind("receive", "node received a message from neighbour `from`", {"from": S, "msg": S},
         {"to": S, **_MESSAGE_IDS}),
    Kind("drop", "a message to `to` was lost (link fault or cut link)", {"to": S},
         {"from": S, "msg": S, "reason": S, **_MESSAGE_IDS}),
    # ---- faults (stabilization windows) ----
    Kind("fault_begin", "an injected fault starts", {"fault_id": S}, _FAULT),
    Kind("fault_end", "an injected fault ends; `ok`/`error` and `before`/`after` are evidence",
         {"fault_id": S},
         {**_FAULT, "ok": B, "error": S, "before": J, "after": J}),
    Kind("fault", "the broker core applied a state fault: evidence of its effect",
         {"target": S}, {"fault_id": S, "args": J, "value": J, "before": J, "after": J}),
    # ---- state (state-level stabilization) ----
    Kind("legitimacy", "a legitimacy check of all brokers' tables (simulator)",
         {"ok": B}, {"problems": N, "sample": J, "required": N}),
    Kind("snapshot", "a broker's state (core Broker.snapshot()); `round` groups one check",
         {"tables": J, "neighbors": L, "root": S, "algorithm": S, "hierarchical": B},
         {"broker": S, "parent": S, "wrapper": B, "next_timer": F, "rebuild_bit": N,
          "mergers": J, "round": N}),
    # ---- broker internals ----
    Kind("expire", "leased entries expired", {"count": N}, {"entries": J}),
    Kind("switch", "periodic-rebuild wrapper: rebuild table `tag`", {"tag": N}),
    Kind("garbage", "a message or request the broker ignored", {"why": S},
         {"from": S, "link": S, "size": N}),
    Kind("merger_invalid", "a merger no longer matches its constituents",
         {}, {"merger_id": S, "filter": S, "dest": S, "constituents": L, "flag": N}),
    # ---- live runtime only ----
    Kind("start", "broker process started (also after a restart)", {},
         {"algorithm": S, "listen": S, "admin": S, "neighbors": L, "addresses": J}),
    Kind("stop", "broker process stopping", {}, {"undrained": N, "counters": J}),
    Kind("link_up", "link to neighbour `link` established", {"link": S}, {"dialer": B}),
    Kind("link_down", "link to neighbour `link` lost", {"link": S}, {"why": S}),
    Kind("link_shape", "link emulation parameters changed", {"link": S},
         {"delay_ms": F, "jitter_ms": F, "loss": F, "duplicate": F, "rate_bps": F}),
    Kind("link_cut", "link cut by the admin API", {"link": S}),
    Kind("link_heal", "link healed by the admin API", {"link": S}),
    Kind("error", "the runtime caught an error", {"error": S}, {"event": S, "effect": S}),
    Kind("undeliverable", "a delivery found no client stream",
         {"client": S, "publisher": S, "seq": N}, {"nid": S, "reason": S}),
    Kind("client_publish", "client library: a publication acknowledged by the broker",
         {"publisher": S, "seq": N}, {"nid": S, "published_at": F}),
    Kind("client_deliver", "client library: a notification arrived at the client",
         {"client": S, "publisher": S, "seq": N},
         {"sub_id": S, "nid": S, "published_at": F}),
    Kind("client_start", "workload client: started, attached to `broker`", {},
         {"broker": S, "address": S}),
    Kind("client_subscribe", "workload client: asked for a subscription",
         {"client": S, "sub_id": S, "broker": S}, {"filter": S}),
    Kind("client_unsubscribe", "workload client: asked to end a subscription",
         {"client": S, "sub_id": S, "broker": S}),
    Kind("client_crash", "workload client: went silent (as `crash`; the oracle reads both)",
         {"client": S, "broker": S}, {"sub_id": S}),
    Kind("client_error", "workload client: a request failed", {"error": S},
         {"op": S, "sub_id": S, "client": S}),
]
KINDS: Mapping[str, Kind] = {k.name: k for k in _KIND_LIST}
CLIENT_KINDS = ("publish", "deliver", "subscribe", "refresh", "unsubscribe", "crash")

# (kind, canonical field) -> writer field that carries it when the canonical one is absent.
ALIASES: Mapping[tuple[str, str], str] = {
    **{(k, "client"): "node" for k in CLIENT_KINDS},  # simulator: node = client
    **{(k, "broker"): "node" for k in CLIENT_KINDS},  # runtime: node = broker
    ("publish", "nid"): "id",  # simulator
    ("deliver", "nid"): "id",  # simulator
    ("send", "nid"): "id",  # simulator
    ("receive", "nid"): "id",  # simulator
    ("drop", "nid"): "id",  # simulator
    ("send", "to"): "link",  # runtime
    ("receive", "from"): "link",  # runtime
    ("drop", "to"): "link",  # runtime
    ("fault_begin", "fault_id"): "fault",  # simulator
    ("fault_end", "fault_id"): "fault",  # simulator
}


def all_fields() -> dict[str, Type]:
    """Every field of every kind (plus aliases) with its one type: the ingest's column set.

    A field name has one type across kinds, so that one Parquet schema holds every kind.
    """
    columns: dict[str, Type] = dict(HEADER)
    for kind in KINDS.values():
        for name, typ in kind.fields.items():
            known = columns.setdefault(name, typ)
            if known is not typ:
                raise AssertionError(f"field {name!r} of {kind.name!r} is {typ}, elsewhere {known}")
    for alias in ALIASES.values():
        columns.setdefault(alias, Type.STR)
    return columns


# ---- reading one file (the Python reference reader; ingest applies the same rules) -----------


def torn_tail(path: Path) -> str | None:
    """The unterminated last line of a trace file if it does not parse (a writer died mid-write).

    A complete last record that only lacks its newline is not torn.
    """
    with path.open("rb") as f:
        size = f.seek(0, 2)
        if size == 0:
            return None
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return None
        pos, tail = size, b""
        while pos > 0:  # scan back for the last newline; traces can be large
            step = min(65536, pos)
            pos -= step
            f.seek(pos)
            tail = f.read(step) + tail
            i = tail.rfind(b"\n")  # the last byte is not one: this ends the previous line
            if i >= 0:
                tail = tail[i + 1:]
                break
    text = tail.decode("utf-8", errors="replace")
    try:
        json.loads(text)
    except ValueError:
        return text
    return None


def read_trace(path: Path | str) -> Iterator[dict[str, Any]]:
    """Yield the canonical records of one trace file.

    Raises TraceVersionError for a record of a version this code does not read, and
    TraceFormatError for a line that is not a record of the schema (naming file and line). A torn
    last line is skipped.
    """
    path = Path(path)
    torn = torn_tail(path)
    with path.open(encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                if torn is not None and not line.endswith("\n"):
                    return  # the torn last line
                raise TraceFormatError(
                    f"{path}:{number}: not a JSON record: {line[:80]!r}") from None
            yield validate(rec, f"{path}:{number}")


def validate(rec: Any, where: str) -> dict[str, Any]:
    """Check version, header and the fields of a known kind; return the canonical record."""
    if not isinstance(rec, dict):
        raise TraceFormatError(f"{where}: not a JSON object")
    check_version(rec.get("v"), where)
    for name, typ in HEADER.items():
        if not _is(rec.get(name), typ):
            raise TraceFormatError(f"{where}: header field {name!r} missing or not {typ}")
    kind = KINDS.get(rec["kind"])
    if kind is None:
        return rec
    rec = canonical(rec)
    for name, typ in kind.fields.items():
        value = rec.get(name)
        if value is None:
            if name in kind.required:
                raise TraceFormatError(f"{where}: {kind.name} record lacks field {name!r}")
        elif not _is(value, typ):
            raise TraceFormatError(f"{where}: {kind.name}.{name} is not {typ}: {value!r}")
    return rec


def check_version(v: Any, where: str) -> None:
    if v not in SUPPORTED_VERSIONS or isinstance(v, bool):
        raise TraceVersionError(
            f"{where}: trace schema version {v!r}; this weeble reads version "
            f"{', '.join(map(str, sorted(SUPPORTED_VERSIONS)))}"
        )


def canonical(rec: dict[str, Any]) -> dict[str, Any]:
    """Fill canonical fields from the writers' aliases (see ALIASES)."""
    out = dict(rec)
    for (kind, name), alias in ALIASES.items():
        if out["kind"] == kind and out.get(name) is None and out.get(alias) is not None:
            out[name] = out[alias]
    return out


def _is(value: Any, typ: Type) -> bool:
    if typ is Type.STR:
        return isinstance(value, str)
    if typ is Type.INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if typ is Type.FLOAT:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if typ is Type.BOOL:
        return isinstance(value, bool)
    if typ is Type.STR_LIST:
        return isinstance(value, list) and all(isinstance(x, str) for x in value)
    return True


# ---- the run directory and its metadata -------------------------------------------------------

TRACE_DIR = "trace"
LIVE_TRACE_DIR = "traces"
ANALYSIS_DIR = "analysis"
RUN_JSON = "run.json"
SIM_SUMMARY = "summary.json"
RUN_JSON_VERSION = 1

RUN_JSON_EXAMPLE = {
    # The contract for live runs; the same keys as the simulator's summary.json where they meet.
    "v": 1,
    "name": "quickstart",
    "t0_ns": 1_732_000_000_000_000_000,  # wall-clock origin of the run (optional: first record)
    "duration": 60.0,  # seconds of the run (optional: up to the last record)
    "routing": {"algorithm": "identity", "hierarchical": True, "wrapper": False},
    "params": {"pi": 20.1, "rho": 20.0, "delta_min": 0.025, "delta_max": 0.025, "d": 4},
}


@dataclass(frozen=True, slots=True)
class RunMeta:
    """What the jobs need to know about a run besides its trace."""

    name: str
    source: str  # "sim" (summary.json) or "live" (run.json)
    algorithm: Algorithm
    wrapper: bool
    hierarchical: bool
    params: Params
    t0_ns: int | None  # None: the first record's time
    duration: float | None  # None: up to the last record

    @property
    def bound(self) -> float:
        """Δ: the algorithm's worst-case stabilization time."""
        return self.params.bound(self.algorithm, self.wrapper)

    @property
    def path(self) -> float:
        """d·δ_max: the longest legal journey of a message through the tree."""
        return self.params.d * self.params.delta_max

    @property
    def activation(self) -> float:
        """A subscription must be served once it is this old (spread, plus one refresh of slack
        for a first copy that met a transiently wrong table); younger, it may be."""
        return self.path + self.params.rho

    @property
    def deactivation(self) -> float:
        """A publication must reach a subscription that lives this long after it; a delivery up
        to this long after an unsubscription is allowed."""
        return self.path

    @property
    def crash_linger(self) -> float:
        """A crashed client's lease lingers up to 2π (F12): deliveries meanwhile are allowed."""
        return 2 * self.params.pi + self.path

    def as_dict(self) -> dict[str, Any]:
        p = self.params
        return {"name": self.name, "source": self.source, "algorithm": self.algorithm.value,
                "wrapper": self.wrapper, "hierarchical": self.hierarchical,
                "params": {"pi": p.pi, "rho": p.rho, "delta_min": p.delta_min,
                           "delta_max": p.delta_max, "d": p.d},
                "t0_ns": self.t0_ns, "duration": self.duration, "bound": self.bound,
                "activation": self.activation, "deactivation": self.deactivation}


def trace_files(run_dir: Path) -> list[Path]:
    """The run's node traces; a clear error when the run or its traces are missing."""
    if not run_dir.exists():
        raise RunDirError(f"{run_dir}: no such run directory")
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir}: not a directory")
    files = sorted((run_dir / TRACE_DIR).glob("*.jsonl"))
    if not files:  # live runs (orchestrator/testbed.py TRACE_DIR) write to traces/
        files = sorted((run_dir / LIVE_TRACE_DIR).glob("*.jsonl"))
    if not files:
        raise RunDirError(f"{run_dir}: no trace files ({TRACE_DIR}/*.jsonl or"
                          f" {LIVE_TRACE_DIR}/*.jsonl)")
    return files


def load_meta(run_dir: Path) -> RunMeta:
    """Read run.json (live) or summary.json (simulator)."""
    live, sim = run_dir / RUN_JSON, run_dir / SIM_SUMMARY
    if live.exists():
        path, source = live, "live"
    elif sim.exists():
        path, source = sim, "sim"
    else:
        raise RunDirError(f"{run_dir}: neither {RUN_JSON} nor {SIM_SUMMARY}: the run's algorithm "
                          f"and timing are unknown")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return _meta(data, source)
    except (ValueError, KeyError, TypeError) as exc:
        what = exc.args[0] if isinstance(exc, KeyError) else exc
        raise RunDirError(f"{path}: {'missing ' if isinstance(exc, KeyError) else ''}{what}") \
            from None


def _meta(data: dict[str, Any], source: str) -> RunMeta:
    if source == "live" and data.get("v") != RUN_JSON_VERSION:
        raise ValueError(f"run.json version {data.get('v')!r}; this weeble reads "
                         f"{RUN_JSON_VERSION}")
    routing, p = data["routing"], data["params"]
    try:
        algorithm = Algorithm(routing["algorithm"])
    except ValueError:
        raise ValueError(f"routing.algorithm: unknown {routing['algorithm']!r}") from None
    params = Params(float(p["pi"]), float(p["rho"]), float(p["delta_min"]),
                    float(p["delta_max"]), int(p["d"]))
    try:
        params.validate(algorithm, bool(routing.get("wrapper", False)))
    except ConfigError as exc:
        raise ValueError(f"params: {exc}") from None
    t0 = data.get("t0_ns")
    duration = data.get("duration")
    return RunMeta(
        name=str(data.get("name") or data.get("scenario") or "run"),
        source=source,
        algorithm=algorithm,
        wrapper=bool(routing.get("wrapper", False)),
        hierarchical=bool(routing.get("hierarchical", False)),
        params=params,
        t0_ns=0 if source == "sim" else (int(t0) if t0 is not None else None),
        duration=float(duration) if duration is not None else None,
    )
