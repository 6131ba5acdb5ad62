"""BrokerConfig: everything one live broker process needs, as one JSON document.

The orchestrator builds a BrokerConfig in Python, writes it with `dump()`, and starts
`python -m weeble.runtime --config FILE`. Validation errors name the field.

    {
      "broker_id": "b1",
      "algorithm": "identity",
      "params": {"pi": 4.0, "rho": 2.0, "delta_min": 0.0, "delta_max": 0.1, "d": 2},
      "root": "b0", "parent": "b0",
      "neighbors": {"b0": "127.0.0.2:7000", "b2": "127.0.0.4:7000"},
      "listen_address": "127.0.0.3:7000",       # links + clients
      "admin_address": "127.0.0.3:7001",        # management: admin, health (no clients)
      "admin_token": "…", "link_token": "…", "client_secret": "…",   # or "open_clients": true
      "tls": {"cert": "b1.crt", "key": "b1.key", "ca": "ca.crt"},   # optional, admin only
      "link_tls": {"cert": "broker-b1.crt", "key": "broker-b1.key", "ca": "ca.crt"},  # optional
      "trace_path": "runs/r1/b1.jsonl",                              # optional
      "metrics_address": "127.0.0.3:9100",                           # optional
      "links": {"b0": {"delay_ms": 5, "jitter_ms": 1}},              # initial egress shaping
      "tuning": {"link_queue_limit": 10000, "link_batch_max": 64}
    }
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from weeble.codec.wire import MAX_BATCH, Limits
from weeble.core.rom import (
    Algorithm,
    ConfigError,
    Mode,
    Ordering,
    OverlayKind,
    Params,
    Rom,
    leased_like,
    rom_fields,
    rom_of_fields,
)
from weeble.runtime.linkshaper import LinkShape
from weeble.runtime.private import write_private

_ADDRESS = re.compile(r"^(?P<host>\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+):(?P<port>\d{1,5})$")


def split_address(address: str) -> tuple[str, int]:
    """'host:port' -> (host, port); IPv6 hosts in brackets. Raises ValueError naming it."""
    m = _ADDRESS.match(address)
    if m is None or not 0 <= int(m["port"]) <= 65535:
        raise ValueError(f"address {address!r}: expected host:port")
    return m["host"].strip("[]"), int(m["port"])


def _check_address(value: str) -> str:
    split_address(value)
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ParamsConfig(_Strict):
    pi: float
    rho: float
    delta_min: float = 0.0
    delta_max: float = 0.0
    d: int = 0


class OptionsConfig(_Strict):
    """The core's Options (broker/core/rom.py), field for field."""

    flag_rule: bool = True
    second_chance: bool = True
    renew_forwarded: bool = True
    unsub_counts_all: bool = True
    qsub: bool = True
    qnot: bool = True
    hold_relays: bool = True
    backoff: float | None = None


class TlsConfig(_Strict):
    """PEM files for the admin server. With `ca`, clients must present a certificate it signed."""

    cert: Path
    key: Path
    ca: Path | None = None


class Tuning(_Strict):
    """Runtime knobs with working defaults; none of them changes what the algorithm does."""

    link_queue_limit: int = Field(default=10_000, ge=1)  # messages kept per link while it is down
    link_queue_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)  # and bytes
    # Messages already due leave together as one Batch envelope, up to this many and up to
    # link_batch_bytes (and never above the peer's maximum message size); nothing is held
    # back to fill a batch unless link_linger_s > 0, so by default this costs no latency.
    # 1 = one gRPC message per message.
    link_batch_max: int = Field(default=64, ge=1, le=MAX_BATCH)  # a peer refuses more
    link_batch_bytes: int = Field(default=1024 * 1024, ge=1024)
    # Seconds the link writer waits for more messages when a batch is not full: more
    # throughput per gRPC message, that much more latency. 0 for latency runs.
    link_linger_s: float = Field(default=0.0, ge=0, le=1.0)
    client_queue_limit: int = Field(default=10_000, ge=1)  # per subscribe stream
    client_queue_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)  # per subscribe stream
    max_message_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)  # gRPC send/receive limit
    # What one filter or notification may be, from a client or a neighbour: larger ones are
    # refused (INVALID_ARGUMENT naming the limit; on a link, dropped and counted as malformed).
    # With these defaults the largest filter parses in a few ms (benchmarks/adversarial.py).
    max_filter_bytes: int = Field(default=16 * 1024, ge=64)
    max_filter_terms: int = Field(default=256, ge=1)
    max_filter_attributes: int = Field(default=128, ge=1)
    max_notification_bytes: int = Field(default=1024 * 1024, ge=64)
    reconnect_min_s: float = Field(default=0.05, gt=0)
    reconnect_max_s: float = Field(default=2.0, gt=0)
    # a dynamic link (reconfiguration) nobody needs is closed after this long without traffic
    link_idle_s: float = Field(default=5.0, gt=0)
    # A stream must say who it is within this long (a link's hello, a PublishStream's first
    # request), and any call must send its request (a unary call, a Subscribe), else it is
    # closed: an unauthenticated or silent call costs memory and nothing else.
    hello_timeout_s: float = Field(default=5.0, gt=0)
    # Streams one peer host may hold open at once, per server (listen, admin), whatever the
    # service; one more is refused (RESOURCE_EXHAUSTED naming this). A local run's clients
    # all come from one host: keep it above the clients' subscribe streams.
    max_streams_per_peer: int = Field(default=4096, ge=1)
    drain_timeout_s: float = Field(default=2.0, ge=0)
    trace_flush_interval_s: float = Field(default=0.2, gt=0)
    # The trace file stops growing at this size (a `trace_capped` record, then counted only);
    # None: unbounded. At ~200 bytes a record, 4 GiB is ~20 million records.
    trace_max_bytes: int | None = Field(default=4 * 1024**3, ge=4096)
    metrics_interval_s: float = Field(default=1.0, gt=0)  # how often table sizes are sampled
    # Trace a `snapshot` of the core's state every this many seconds (None: never); the
    # testbed sets it to the scenario's trace.snapshots_every, else to Δ/10.
    snapshot_period_s: float | None = Field(default=None, gt=0)
    seed: int | None = None  # link shaper randomness; None = fresh per process


# the fields of a config that carry the broker's Rom (`core.rom.rom_fields`), but the neighbours
_ROM_FIELDS = frozenset(("broker_id", "algorithm", "params", "root", "parent", "hierarchical",
                         "wrapper", "options", "adverts", "ordering", "overlay", "colours",
                         "optimizer", "mode", "anti_entropy", "skip_ring"))


class BrokerConfig(_Strict):
    broker_id: str = Field(min_length=1)
    algorithm: Algorithm
    params: ParamsConfig
    root: str = Field(min_length=1)
    parent: str | None = None
    hierarchical: bool = False
    wrapper: bool = False
    options: OptionsConfig = OptionsConfig()
    adverts: bool = False
    ordering: Ordering = Ordering.FIFO
    overlay: OverlayKind = OverlayKind.STATIC
    colours: dict[str, Any] | None = None  # the 3-colour scheme's ROM (rom.Colours' fields)
    optimizer: dict[str, Any] | None = None  # the tree optimizer's ROM (rom.Optimizer's fields)
    mode: Mode = Mode.LEASING  # how routing tables are kept correct (rom.Mode)
    anti_entropy: dict[str, Any] | None = None  # the anti-entropy ROM (rom.AntiEntropy's fields)
    skip_ring: dict[str, Any] | None = None  # the skip-ring ROM (rom.SkipRing's fields)
    neighbors: dict[str, str] = Field(default_factory=dict)  # neighbour id -> its listen address
    # the address book: every other broker of the run a link may be opened to at run time
    # (reconfiguration: new neighbours, the link exchange's out-of-band channels)
    peers: dict[str, str] = Field(default_factory=dict)
    # every broker id of the run (the orchestrator's plan): no client may use one as its id,
    # at any broker (clients share the core's namespace of ids); brokers added later reach
    # the address book (peers, admin SetPeers), which counts as well
    run_brokers: list[str] = Field(default_factory=list)
    listen_address: str
    admin_address: str
    admin_token: str = Field(min_length=16)
    link_token: str = Field(min_length=1)
    # Client authentication (clientauth.py): each client proves its id with a token derived
    # from this per-run secret. Without one, `open_clients: true` must say so explicitly: any
    # client may then claim any id (local play only).
    client_secret: str | None = Field(default=None, min_length=16)
    open_clients: bool = False
    tls: TlsConfig | None = None
    # TLS on the listen port (links and clients): this broker's certificate, which names it
    # (certs.py), and the run's CA. Every peer must present a certificate of that CA: a
    # neighbour one that names the broker its hello claims to be (links.py), a client the
    # run's client certificate (its id is still proved by its token).
    link_tls: TlsConfig | None = None
    trace_path: Path | None = None
    metrics_address: str | None = None
    links: dict[str, LinkShape] = Field(default_factory=dict)
    tuning: Tuning = Tuning()

    _addresses = field_validator("listen_address", "admin_address")(_check_address)

    @field_validator("metrics_address")
    @classmethod
    def _metrics(cls, value: str | None) -> str | None:
        return None if value is None else _check_address(value)

    @field_validator("neighbors", "peers")
    @classmethod
    def _neighbor_addresses(cls, value: dict[str, str]) -> dict[str, str]:
        for name, address in value.items():
            try:
                split_address(address)
            except ValueError as e:
                raise ValueError(f"neighbour {name!r}: {e}") from None
        return value

    @model_validator(mode="after")
    def _consistent(self) -> BrokerConfig:
        if self.broker_id in self.neighbors:
            raise ValueError(f"neighbors: contains the broker itself ({self.broker_id!r})")
        if self.parent is not None and self.parent not in self.neighbors:
            raise ValueError(f"parent: {self.parent!r} is not a neighbour")
        # a peer of the address book is a neighbour to be (a link made at run time)
        unknown = sorted(set(self.links) - set(self.neighbors) - set(self.peers))
        if unknown:
            raise ValueError(f"links: unknown neighbour(s) {unknown}")
        if self.client_secret is None and not self.open_clients:
            raise ValueError("client_secret: required (clients authenticate with tokens derived"
                             " from it); set open_clients: true for an open broker (local play"
                             " only)")
        if self.client_secret is not None and self.open_clients:
            raise ValueError("open_clients: true contradicts client_secret (choose one)")
        if self.link_tls is not None and self.link_tls.ca is None:
            raise ValueError("link_tls.ca: required (peers' certificates are checked against it)")
        if self.listen_address == self.admin_address:
            raise ValueError("admin_address: must differ from listen_address")
        try:
            self.params_obj().validate(leased_like(self.algorithm, self.mode), self.wrapper)
        except ConfigError as e:
            raise ValueError(f"params.{e}") from None
        return self

    # ---- derived ----------------------------------------------------------------------------

    def params_obj(self) -> Params:
        return Params(**self.params.model_dump())

    def to_rom(self) -> Rom:
        rom = rom_of_fields(self.model_dump(include=_ROM_FIELDS), self.neighbors)
        if rom.mode is Mode.SKIP_RING:
            # a live broker admits link sessions only from its neighbours and planned ones:
            # the skip ring's members announce the brokers they are about to link to
            rom = replace(rom, skip_ring=replace(rom.skip_ring, announce=True))
        return rom

    @staticmethod
    def rom_fields(rom: Rom) -> dict[str, Any]:
        """The fields of a config that carry `rom` (the inverse of `to_rom`, but for the
        neighbours' addresses, which the orchestrator adds)."""
        return rom_fields(rom)

    def limits(self) -> Limits:
        t = self.tuning
        return Limits(filter_bytes=t.max_filter_bytes, filter_terms=t.max_filter_terms,
                      filter_attributes=t.max_filter_attributes,
                      notification_bytes=t.max_notification_bytes)

    def dials(self, neighbor: str) -> bool:
        """The broker with the lexicographically smaller id dials; the other accepts."""
        return self.broker_id < neighbor

    # ---- files ------------------------------------------------------------------------------

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)

    def dump(self, path: Path | str) -> Path:
        """Write the config (it holds the admin and link tokens: 0600, see private.py)."""
        return write_private(path, self.to_json() + "\n")

    @classmethod
    def load(cls, path: Path | str) -> BrokerConfig:
        """Read a config file; raises ConfigError naming the file and the bad fields."""
        path = Path(path)
        try:
            data: Any = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise ConfigError(f"{path}: {e}") from None
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            raise ConfigError(f"{path}: {format_errors(e)}") from None


def format_errors(error: ValidationError) -> str:
    """One line per problem: 'field.path: message'."""
    lines = []
    for err in error.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(config)"
        lines.append(f"{where}: {err['msg']}")
    return "; ".join(lines)
