"""The fault vocabulary as data: one model per kind, in a registry.

A fault is what Chaos Mesh calls a chaos object: a kind, a selector for what it hits, the kind's
parameters, and when and for how long (`at`/`after`/`every`, `duration`; see experiment.py for
the schedule). The kinds cover the fault model of spec ch3 §6.3:

| kind         | what it does                                               | spec           |
|--------------|------------------------------------------------------------|----------------|
| corrupt      | set a RAM field through the core's corruption API          | F1–F6, F13–F15 |
| clock        | set a broker's modulo-π clock                              | F10            |
| inject       | a message nobody sent appears on a link                    | F7, F8, F15    |
| drop         | a link loses messages (probability)                        | F9             |
| duplicate    | a link sends messages twice (probability)                  | F9             |
| garble       | a link flips a byte of messages (probability)              | F9             |
| delay        | a link's delay leaves [δ_min, δ_max]                       | F11            |
| cut / heal   | nothing passes a link, either way / until healed           | (F9: loss)     |
| flap         | a link is cut and healed over and over                     | (F9)           |
| partition    | cut every link between a set of brokers and the rest       | (F9)           |
| crash        | killed; after `duration`, restarted with empty RAM         | F6             |
| restart      | start a crashed broker again (empty RAM)                   | F6             |
| pause        | frozen for `duration` (alive, answering nothing)           | (F11: delay)   |
| client_crash | a subscriber stops refreshing without unsubscribing        | F12            |

F13 (an all-covering entry plus initialized tables) and F14 (a false merger) are `corrupt`
faults at the same instant: `entry.insert` or `merger.insert` at one broker, `table.clear` at
the others. F16 (advertisements) waits for the advertisement layer.

Adding a kind (color or parent-pointer corruption when the 3-color scheme arrives): a RAM field
the core's corruption API learns is at once a valid `corrupt` field, since `field` is checked
against `core.broker.TARGETS`. A kind of its own is a model here decorated with `@register`,
its one implementation in weeble/chaos/actions.py (`@action("kind")`), written against the
Target protocol, so that it runs in the simulator and live alike.
"""

from __future__ import annotations

import difflib
import json
import random
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from weeble.core.broker import TARGETS, Broker
from weeble.core.filters import Filter, FilterSyntaxError, attribute_error
from weeble.core.messages import Message as CoreMessage
from weeble.core.messages import Notification, Notify, Sub, Switch, Unsub
from weeble.core.rom import Params, Rom
from weeble.core.routing.faults import random_fault
from weeble.core.table import Entry
from weeble.model.selectors import (
    BrokerSelector,
    ClientSelector,
    LinkSelector,
    SelectorError,
    Tree,
)

Lasting = Literal["never", "optional", "required"]
Direction = Literal["both", "forward", "backward"]
RANDOM_FIELD = "random"  # corrupt: a random type-correct fault drawn from the broker's state
SAMPLE = 20  # entries shown per side of a table diff; the counts are always complete
ENTRY_FIELDS = ("entry.filter", "entry.sub_id", "entry.dest", "entry.flag", "entry.delete")


class FaultError(ValueError):
    """A fault that cannot apply to this tree; `field` names the fault's offending field."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field, self.problem = field, problem


class _Model(BaseModel):
    # Unknown keys are typos; silently ignoring one would run a different experiment.
    model_config = ConfigDict(extra="forbid", frozen=True)


# The phases a fault can be scheduled in (`during:`): the manager's records (`reconfiguration`:
# started, finished) and the brokers' (`reconfig`: the coordinated link exchange of thesis 4.4.2,
# the 3-colour scheme's at R, 4.5), the phases docs/trace-schema.md lists for the two kinds.
MANAGER_PHASES = ("started", "finished")
EXCHANGE_PHASES = (
    "request", "lock", "locked", "lock_refused", "lock_released", "retry", "failed", "refused",
    "begin", "gray", "released", "end", "r_removed", "a_released", "unlocked", "done")
COLOUR_PHASES = ("submitted", "disseminated", "activated", "refused")
BROKER_PHASES = (*EXCHANGE_PHASES, *COLOUR_PHASES[:-1])
PHASES = (*MANAGER_PHASES, *BROKER_PHASES)


class During(_Model):
    """Schedule a fault inside a reconfiguration window, Chaos Mesh style, as data:

        during: r2                                   # when reconfiguration r2 starts
        during: {reconfiguration: 2, phase: locked, broker: b3, delay: 0.01}

    The fault strikes `delay` s after reconfiguration `reconfiguration` (its rid: `r<n>`, or n,
    for the scenario's n-th operation as R15's table names it; or an optimizer decision's id,
    `ci:<broker>:<n>`) reaches `phase`: the manager's
    `started`/`finished`, or a phase a broker records (`reconfig` records: lock, locked, begin,
    gray, end, unlocked, ... of the link exchange; submitted, disseminated, activated of the
    3-colour scheme), at `broker` if given (else wherever it happens first). It never strikes
    if that phase never comes; the outcome says so."""

    reconfiguration: str
    phase: str = "started"
    broker: str | None = None
    delay: float = Field(default=0.0, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str | int) and not isinstance(data, bool):
            data = {"reconfiguration": data}
        if isinstance(data, dict) and isinstance(data.get("reconfiguration"), int) and \
                not isinstance(data["reconfiguration"], bool):
            n = data["reconfiguration"]
            if n < 1:
                raise ValueError(f"reconfiguration: {n}: they are numbered from 1 (r1, r2, ...)")
            data = {**data, "reconfiguration": f"r{n}"}
        return data

    @field_validator("phase")
    @classmethod
    def _phase(cls, phase: str) -> str:
        if phase not in PHASES:
            close = difflib.get_close_matches(phase, PHASES, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ValueError(f"unknown reconfiguration phase {phase!r} ({hint}valid:"
                             f" {', '.join(PHASES)})")
        return phase

    @field_validator("broker")
    @classmethod
    def _broker_phase(cls, broker: str | None, info: ValidationInfo) -> str | None:
        if broker is not None and info.data.get("phase") in MANAGER_PHASES:
            raise ValueError(f"the manager's phase {info.data['phase']!r} happens at no"
                             " broker: remove broker, or name a broker's phase (lock, locked,"
                             " begin, gray, end, unlocked, ...)")
        return broker

    def describe(self) -> str:
        at = f" at {self.broker}" if self.broker else ""
        after = f" + {self.delay:g} s" if self.delay else ""
        return f"{self.reconfiguration} {self.phase}{at}{after}"


class Fault(_Model):
    """Fields every kind has: its name and its schedule (see experiment.py)."""

    kind: str
    name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.:-]+$")
    # inside a reconfiguration window, instead of `at`/`after` (see During)
    during: During | None = None
    at: float | None = Field(default=None, ge=0)  # s after the experiment starts
    after: float | None = Field(default=None, ge=0, validate_default=True)  # s after the
    #                                                       previous fault in the list ended
    every: float | None = Field(default=None, gt=0)  # repeat with this period ...
    times: int | None = Field(default=None, ge=1, validate_default=True)  # ... this many times
    duration: float | None = Field(default=None, gt=0, validate_default=True)

    spec: ClassVar[str] = ""  # the fault ids of spec ch3 §6.3 this kind injects
    lasting: ClassVar[Lasting] = "never"

    # Field validators (not one model validator) so that an error names its field.

    @field_validator("after")
    @classmethod
    def _at_or_after(cls, after: float | None, info: ValidationInfo) -> float | None:
        at = info.data.get("at")
        if at is not None and after is not None:
            raise ValueError("give either `at` or `after`, not both")
        if info.data.get("during") is not None and (at is not None or after is not None):
            raise ValueError("give either `during` (a reconfiguration's phase) or `at`/`after`,"
                             " not both")
        if at is None and after is None and "at" in info.data and \
                info.data.get("during") is None and "during" in info.data:
            raise ValueError("`at` (s from the start) or `after` (s after the previous fault)"
                             " is required, or `during` (a reconfiguration's phase)")
        return after

    @field_validator("times")
    @classmethod
    def _repeats(cls, times: int | None, info: ValidationInfo) -> int | None:
        if times is not None and times > 1 and info.data.get("every") is None:
            raise ValueError("repeating needs `every: <period in s>`")
        if info.data.get("during") is not None and (
                info.data.get("every") is not None or times is not None):
            raise ValueError("a fault `during` a reconfiguration strikes once: remove"
                             " every/times (write one fault per reconfiguration)")
        return times

    @field_validator("duration")
    @classmethod
    def _lasts(cls, duration: float | None, info: ValidationInfo) -> float | None:
        kind = cls.model_fields["kind"].default
        if cls.lasting == "never" and duration is not None:
            raise ValueError(f"a {kind} fault is instantaneous; remove duration")
        if cls.lasting == "required" and duration is None:
            raise ValueError(f"a {kind} fault needs a duration (s)")
        every = info.data.get("every")
        if every is not None and duration is not None and duration >= every:
            raise ValueError(f"{duration:g} s does not end before the next repetition"
                             f" (every {every:g} s)")
        return duration

    def check(self, tree: Tree, params: Params | None) -> None:
        """Raise FaultError naming the field when this fault cannot apply to `tree`."""
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, BrokerSelector | LinkSelector):
                try:
                    value.validate_on(tree)
                except SelectorError as e:
                    raise FaultError(name, str(e)) from None

    @property
    def lead(self) -> float:
        """Seconds of preparation before the fault strikes at its planned time."""
        return 0.0

    def selector(self) -> str:
        """What the fault hits, as written (before the selector is resolved)."""
        for name in ("target", "link"):
            value = getattr(self, name, None)
            if value is not None:
                return str(value.describe())
        return "-"

    def describe(self) -> str:
        """A short human text of what and where, for tables and logs."""
        return f"{self.kind} {self.selector()}"


KINDS: dict[str, type[Fault]] = {}


def register(cls: type[Fault]) -> type[Fault]:
    kind = cls.model_fields["kind"].default
    if not isinstance(kind, str) or kind in KINDS:
        raise TypeError(f"{cls.__name__}: kind must be a new string default, got {kind!r}")
    KINDS[kind] = cls
    return cls


# ---- what faults hit ------------------------------------------------------------------------


class OnBrokers(Fault):
    target: BrokerSelector


class OnLinks(Fault):
    link: LinkSelector
    # both: each direction of the link; forward: only link[0] -> link[1]; backward: the other
    direction: Direction = "both"


# ---- state faults (admin Corrupt: the core's corruption API) --------------------------------


class EntryPin(_Model):
    """The routing-table entry an entry.* corruption hits, by what it is (its subscription id,
    filter, destination: any of them, at least one) rather than where it sits: a table's order
    is its arrival order, which differs live and after a shrink cut other parts of a run. It is
    looked up in the broker's table (`args.table`, default 0) when the fault strikes; a fault
    whose entry is not there then does not take effect, and says so."""

    sub_id: str | None = None
    filter: str | None = None
    dest: str | None = None

    _filter = field_validator("filter")(lambda value: value if value is None else _parses(value))

    @model_validator(mode="after")
    def _some(self) -> EntryPin:
        if self.sub_id is None and self.filter is None and self.dest is None:
            raise ValueError("name the entry by sub_id, filter or dest (at least one)")
        return self

    def matches(self, entry: dict[str, Any]) -> bool:
        """Whether a snapshot's entry ({sub_id, filter, dest, flag}) is this one."""
        return ((self.sub_id is None or entry["sub_id"] == self.sub_id)
                and (self.dest is None or entry["dest"] == self.dest)
                and (self.filter is None
                     or Filter.parse(entry["filter"]) == Filter.parse(self.filter)))

    def describe(self) -> str:
        return ", ".join(f"{k} {v!r}" for k, v in self.model_dump(exclude_none=True).items())


@register
class CorruptFault(OnBrokers):
    kind: Literal["corrupt"] = "corrupt"
    # Which RAM field: a target of core.corruption, or `random` (any type-correct fault drawn
    # from the broker's state at that moment). An entry.* fault without `entry`, or `index` or
    # `sub_id` in `args`, picks a random entry of the broker's table.
    field: str
    value: Any = None
    args: dict[str, Any] = {}
    entry: EntryPin | None = None  # which entry an entry.* fault hits (else: `args`, or random)

    spec: ClassVar[str] = "F1-F6, F13-F15"

    @field_validator("field")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in (*TARGETS, RANDOM_FIELD):
            raise ValueError(f"unknown RAM field {value!r} (valid: {', '.join(TARGETS)},"
                             f" {RANDOM_FIELD})")
        return value

    @field_validator("entry")
    @classmethod
    def _pinned(cls, entry: EntryPin | None, info: ValidationInfo) -> EntryPin | None:
        if entry is None:
            return None
        field = info.data.get("field")
        if field is not None and _plain_field(field) not in ENTRY_FIELDS:
            raise ValueError(f"pins an entry, which {field} does not change (only"
                             f" {', '.join(ENTRY_FIELDS)} and their adv. forms do)")
        named = {"index", "sub_id"} & set(info.data.get("args") or {})
        if named:
            raise ValueError(f"the entry is named twice: by `entry` and by args"
                             f" {', '.join(sorted(named))} (keep `entry`)")
        return entry

    def describe(self) -> str:
        pin = f" [{self.entry.describe()}]" if self.entry is not None else ""
        return f"corrupt {self.field}{pin} @ {self.target.describe()}"

    def draw(self, rom: Rom, core: dict[str, Any],
             rng: random.Random) -> tuple[str, Any, dict[str, Any]]:
        """The (field, value, args) to send to the broker's corruption API, given its state
        (a core snapshot): the fault as written, or what it leaves to chance drawn from the
        state — a random entry for an entry.* fault without `index`/`sub_id`, any fault for
        `random`. LookupError when there is nothing to corrupt."""
        if self.field == RANDOM_FIELD:
            if "skip_ring" in core:
                return _random_skip_ring(core, rng)
            return _random_effective(rom, core, rng)
        if self.field.startswith(SKIP_RING_PREFIX):
            # the values are drawn in the core from a seed: the fault's, or one from the run's
            return self.field, self.value, {"seed": rng.randrange(1 << 31), **self.args}
        if self.entry is not None:
            return self._pinned_entry(core, self.entry, rom, rng)
        if self.field not in ENTRY_FIELDS or {"index", "sub_id"} & set(self.args):
            return self.field, self.value, dict(self.args)
        choices = [(t, i) for t, table in enumerate(core["tables"]) for i in range(len(table))]
        if not choices:
            raise LookupError("no entry to corrupt: the routing table is empty")
        table, index = rng.choice(choices)
        filters = sorted({e["filter"] for t in core["tables"] for e in t})
        value = self.entry_value(core["tables"][table][index], filters,
                                 sorted(rom.neighbors), rng)
        # by sub_id rather than index: the table may change before the fault reaches it
        entry_id = core["tables"][table][index]["sub_id"]
        return self.field, value, {**self.args, "table": table, "sub_id": entry_id}

    def _pinned_entry(self, core: dict[str, Any], pin: EntryPin, rom: Rom,
                      rng: random.Random) -> tuple[str, Any, dict[str, Any]]:
        """The pinned entry, found in the broker's table now; LookupError when it holds none.
        It goes to the core by all three of its names, so that the core changes that entry
        even among others of the same sub_id."""
        which = self.args.get("table", 0)
        tables = core.get("adv_tables" if self.field.startswith("adv.") else "tables") or []
        table = tables[which] if isinstance(which, int) and 0 <= which < len(tables) else []
        found = sorted((e for e in table if pin.matches(e)),
                       key=lambda e: (e["sub_id"], e["filter"], e["dest"]))
        if not found:
            raise LookupError(f"{self.field}: the pinned entry ({pin.describe()}) is not in"
                              f" table {which} ({len(table)} entries): nothing changed")
        e = found[0]
        filters = sorted({x["filter"] for t in tables for x in t})
        value = self.entry_value(e, filters, sorted(rom.neighbors), rng)
        return self.field, value, {**self.args, "table": which, "sub_id": e["sub_id"],
                                   "filter": e["filter"], "dest": e["dest"]}

    def entry_value(self, entry: dict[str, Any], filters: list[str], neighbors: list[str],
                    rng: random.Random) -> Any:
        """The value an entry.* fault without one sets on `entry`: drawn at random, but never
        the value the entry already has (a fault that changes nothing proves nothing)."""
        if self.value is not None or self.field in ("entry.delete", "entry.flag"):
            return self.value  # entry.flag without a value toggles the flag
        if self.field == "entry.filter":
            current = entry["filter"]
            pool = [f for f in filters if f != current] or [
                x for x in ("true", "class == -1") if x != current]
        elif self.field == "entry.sub_id":
            pool = [f"bogus{rng.randrange(1000)}"]
        else:  # entry.dest: another neighbour, or a destination that does not exist
            pool = [d for d in [*neighbors, "ghost"] if d != entry["dest"]]
        return rng.choice(sorted(pool))


@register
class ClockFault(OnBrokers):
    kind: Literal["clock"] = "clock"
    value: float | None = Field(default=None, ge=0)  # seconds into the period; None: random

    spec: ClassVar[str] = "F10"

    def check(self, tree: Tree, params: Params | None) -> None:
        super().check(tree, params)
        if params is not None and self.value is not None and not self.value < params.pi:
            raise FaultError("value", f"{self.value} is not in [0, pi={params.pi:g})")

    def clock_value(self, pi: float, rng: random.Random) -> float:
        return self.value if self.value is not None else rng.uniform(0, pi * 0.999)


# ---- message faults -------------------------------------------------------------------------


def _finite(attributes: dict[str, int | float | str | bool]) -> dict[str, int | float | str | bool]:
    for name, value in attributes.items():
        why = attribute_error(name, value)
        if why is not None:
            raise ValueError(why)
    return attributes


# A notification's attributes, as scenario files and experiments give them: ±inf and NaN (valid
# YAML: .inf, .nan) are refused with the attribute's name (filters.attribute_error)
Attributes = Annotated[dict[str, int | float | str | bool], AfterValidator(_finite)]


class Message(_Model):
    """A link message to inject, in the core's terms (messages.py)."""

    type: Literal["sub", "unsub", "notify", "switch"]
    sub_id: str = "chaos-injected"
    filter: str = "true"  # the all-covering filter by default: the worst bogus subscription
    tag: int = Field(default=0, ge=0)
    publisher: str = "chaos"
    seq: int = Field(default=1, ge=0)
    attributes: Attributes = {}

    _filter = field_validator("filter")(lambda value: _parses(value))

    def to_core(self) -> CoreMessage:
        if self.type == "sub":
            return Sub(self.sub_id, Filter.parse(self.filter), self.tag)
        if self.type == "unsub":
            return Unsub(self.sub_id, Filter.parse(self.filter), self.tag)
        if self.type == "switch":
            return Switch(self.tag)
        return Notify(Notification(self.publisher, self.seq, dict(self.attributes)))


@register
class InjectFault(OnLinks):
    """The message appears at the link's far end as if its near end had sent it."""

    kind: Literal["inject"] = "inject"
    message: Message
    direction: Direction = "forward"

    spec: ClassVar[str] = "F7, F8, F15"

    def describe(self) -> str:
        return f"inject {self.message.type} {self.link.describe()}"


class _Shaping(OnLinks):
    lasting: ClassVar[Lasting] = "required"


@register
class DropFault(_Shaping):
    kind: Literal["drop"] = "drop"
    probability: float = Field(default=1.0, ge=0, le=1)
    spec: ClassVar[str] = "F9"


@register
class DuplicateFault(_Shaping):
    kind: Literal["duplicate"] = "duplicate"
    probability: float = Field(default=1.0, ge=0, le=1)
    spec: ClassVar[str] = "F9"


@register
class GarbleFault(_Shaping):
    """Flip a random byte of each affected message on the wire: the receiver drops what no
    longer decodes and takes whatever still does (a different sub_id, filter, tag, ...)."""

    kind: Literal["garble"] = "garble"
    probability: float = Field(default=1.0, ge=0, le=1)
    spec: ClassVar[str] = "F9"


@register
class DelayFault(_Shaping):
    kind: Literal["delay"] = "delay"
    delay_ms: float = Field(ge=0)
    jitter_ms: float = Field(default=0.0, ge=0)
    spec: ClassVar[str] = "F11"


# ---- link state -----------------------------------------------------------------------------


class _LinkState(Fault):
    link: LinkSelector


@register
class CutFault(_LinkState):
    """Nothing passes, either way; healed after `duration` (without one: by a `heal`)."""

    kind: Literal["cut"] = "cut"
    lasting: ClassVar[Lasting] = "optional"


@register
class HealFault(_LinkState):
    kind: Literal["heal"] = "heal"


@register
class FlapFault(_LinkState):
    """Cut for `down` s, up for `up` s, again and again for `duration` s; healed at the end."""

    kind: Literal["flap"] = "flap"
    down: float = Field(default=0.5, gt=0)
    up: float = Field(default=0.5, gt=0)
    lasting: ClassVar[Lasting] = "required"


@register
class PartitionFault(Fault):
    """Cut every link between the selected brokers and the rest of the tree."""

    kind: Literal["partition"] = "partition"
    target: BrokerSelector
    lasting: ClassVar[Lasting] = "optional"

    def check(self, tree: Tree, params: Params | None) -> None:
        super().check(tree, params)
        side = self.target.resolve(tree, random.Random(0))
        if self.target.random is None and not tree.boundary(side):
            raise FaultError("target", f"{self.target.describe()} is the whole tree: no link"
                             " crosses its boundary")

    def describe(self) -> str:
        return f"partition {self.target.describe()}"


# ---- processes ------------------------------------------------------------------------------


@register
class CrashFault(OnBrokers):
    """Killed (the backend's hardest stop: SIGKILL locally, `docker kill`): no drain, RAM
    lost. With `duration`, a fresh process (empty RAM, same ROM) starts that much later;
    without, the broker stays down until a `restart`."""

    kind: Literal["crash"] = "crash"
    lasting: ClassVar[Lasting] = "optional"
    spec: ClassVar[str] = "F6"


@register
class RestartFault(OnBrokers):
    kind: Literal["restart"] = "restart"
    spec: ClassVar[str] = "F6"


@register
class PauseFault(OnBrokers):
    """Frozen for `duration` (SIGSTOP/SIGCONT locally, `docker pause`), then resumed: a broker
    that is alive but answers nothing; its neighbours' messages wait in the kernel and arrive
    late, its timers fire late."""

    kind: Literal["pause"] = "pause"
    lasting: ClassVar[Lasting] = "required"


# ---- clients --------------------------------------------------------------------------------


@register
class ClientCrashFault(Fault):
    """A subscriber crashes: its refreshes stop, no unsubscription; its entries must vanish
    within 2π (F12). Either `target` brokers: a chaos client subscribes at each `settle` s before
    the fault, refreshes until then, and crashes at the planned time; or `clients` of the
    workload (named, or {random: k} of those subscribed then) crash."""

    kind: Literal["client_crash"] = "client_crash"
    target: BrokerSelector | None = None
    clients: ClientSelector | None = Field(default=None, validate_default=True)
    filter: str = "true"
    settle: float = Field(default=1.0, ge=0)  # s between subscribing and crashing

    spec: ClassVar[str] = "F12"

    _filter = field_validator("filter")(lambda value: _parses(value))

    @field_validator("clients")
    @classmethod
    def _one_of(cls, clients: ClientSelector | None,
                info: ValidationInfo) -> ClientSelector | None:
        if (clients is None) == (info.data.get("target") is None) and "target" in info.data:
            raise ValueError("give either `target` (brokers where chaos clients subscribe) or"
                             " `clients` (subscribers of the workload), not both or neither")
        return clients

    @property
    def lead(self) -> float:
        return self.settle if self.target is not None else 0.0

    def selector(self) -> str:
        return self.clients.describe() if self.clients is not None else super().selector()


def _plain_field(field: str) -> str:
    """entry.* for adv.entry.* (the advertisement tables' entries are entries alike)."""
    return field.removeprefix("adv.")


def replica(rom: Rom, core: dict[str, Any]) -> Broker:
    """A core Broker with this ROM and the tables of a snapshot (what random faults draw from
    and are tried on)."""
    broker = Broker(rom)
    broker.ram.next_timer = float(core.get("next_timer", 0.0))
    for i, table in enumerate(core["tables"][: len(broker.ram.tables)]):
        for e in table:
            broker.ram.tables[i].add(Entry(e["sub_id"], Filter.parse(e["filter"]), e["dest"],
                                           int(e["flag"])))
    return broker


SKIP_RING_PREFIX = "skipring."


def _random_skip_ring(core: dict[str, Any], rng: random.Random) -> tuple[str, Any, dict[str, Any]]:
    """A random fault of a skip-ring broker (mode skip_ring): a member's label, edges or whole
    overlay state, or, at a supervisor, its database; LookupError when it holds none."""
    sr = core["skip_ring"]
    choices = [(f, {"topic": t}) for t in sorted(sr.get("members", {}))
               for f in ("skipring.label", "skipring.edges", "skipring.member")]
    choices += [("skipring.database", {"topic": t}) for t in sorted(sr.get("supervised", {}))]
    if not choices:
        raise LookupError("no skip-ring state to corrupt: a member of no topic, supervising none")
    field, args = rng.choice(choices)
    return field, None, {**args, "seed": rng.randrange(1 << 31)}


def _random_effective(rom: Rom, core: dict[str, Any],
                      rng: random.Random) -> tuple[str, Any, dict[str, Any]]:
    """A random type-correct fault (core.routing.faults.random_fault) that changes the state: one
    that would not (a flag set to the flag it has) is drawn again, up to 20 times."""
    filters = sorted({Filter.parse(e["filter"]) for t in core["tables"] for e in t}, key=str)
    for _ in range(20):
        fault = random_fault(replica(rom, core), rng, filters)
        trial = replica(rom, core)
        before = trial.snapshot()
        try:
            trial.step(0.0, fault)
        except Exception:  # any fault the core refuses is drawn again
            continue
        if state_diff(before, trial.snapshot()):
            break
    return fault.target, _plain(fault.value), dict(fault.args)


def _plain(value: Any) -> Any:
    """A core fault value as JSON for the admin API (filters as their text)."""
    if isinstance(value, Filter):
        return str(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    return value


def _parses(value: str) -> str:
    try:
        Filter.parse(value)
    except FilterSyntaxError as e:
        raise ValueError(f"{value!r}: {e}") from None
    return value


def state_diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What changed in a broker's RAM between two core snapshots ({} = nothing)."""
    diff: dict[str, Any] = {}
    # the values of the routing layer, and of the overlay and exchange layers (their RAM)
    # (and of the 3-colour scheme: the colours and pointers, the recolor flags and requests)
    # (and of the skip ring: its members' overlay state and the supervisors' databases)
    # (and of the tree optimizer: its cache, environment and link costs)
    for key in ("next_timer", "rebuild_bit", "neighbors", "parent", "exchange", "colours",
                "recolor", "skip_ring", "optimize"):
        if before.get(key) != after.get(key):
            diff[key] = {"before": before.get(key), "after": after.get(key)}
    for key in ("tables", "mergers", "loaned", "adv_tables"):
        old, new = _entries(before.get(key)), _entries(after.get(key))
        removed = sorted(old - new)
        added = sorted(new - old)
        if removed or added:
            diff[key] = {"removed": len(removed), "added": len(added),
                         "removed_sample": [json.loads(e) for e in removed[:SAMPLE]],
                         "added_sample": [json.loads(e) for e in added[:SAMPLE]]}
    return diff


def _entries(value: Any) -> set[str]:
    """Table entries (or mergers) as canonical JSON strings, tagged with their table index."""
    if not value:
        return set()
    if isinstance(value, list) and value and isinstance(value[0], list):  # tables: [[...], ...]
        return {json.dumps({"table": i, **e}, sort_keys=True)
                for i, table in enumerate(value) for e in table}
    return {json.dumps(e, sort_keys=True) for e in value}
