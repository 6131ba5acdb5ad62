"""The simulator as a fault target: what the chaos module's fault actions call, in virtual time.

It implements the Target protocol of weeble/chaos/target.py structurally (the simulator does not
import chaos: chaos sits above it). The actions are coroutines; here they run on the engine's
clock: `sleep_until(t)` suspends one until the engine reaches t, and nothing else ever suspends,
so a simulated fault happens at one virtual instant, in the engine's deterministic order.

What maps exactly: state faults (the core's Corrupt events), injected messages, drop, duplicate,
delay, cuts, client crashes. What maps approximately, and says so in its evidence (`sim`):
- garble: there are no bytes; a garbled envelope usually no longer decodes and the receiver
  drops it, so it is a loss with the same probability;
- a killed broker takes no events at all (messages to it, its timers, its clients' requests are
  lost) until a restart gives it a fresh core (empty RAM) and a Start; its ROM is the one it
  boots with now (`roms`, the simulation's: its neighbours and parent in the tree as the
  reconfigurations left it, as a live backend restarts a broker from its current config);
- pause: every message to or from the broker is held for the pause (a link delay of the
  pause's length); the simulated broker itself keeps running its timers;
- delay jitter is not simulated (the delay is delay_ms exactly).
"""

from __future__ import annotations

from collections.abc import Coroutine, Generator, Mapping
from typing import Any, Protocol

from weeble.core.broker import Broker
from weeble.core.events import Corrupt, Receive, Start
from weeble.core.filters import Filter
from weeble.core.messages import Message
from weeble.core.reconfig.plan import Tree as PlanTree
from weeble.core.rom import Params, Rom
from weeble.model.selectors import Tree
from weeble.sim.engine import Engine, Node
from weeble.sim.workload import Clients, ClientSub

CHAOS = "chaos"  # node and file of the fault records
_SHAPE_KEYS = ("delay_ms", "jitter_ms", "loss", "duplicate", "corrupt")
_APPROXIMATE = {"corrupt": "garbled = lost (no bytes in the simulator)",
                "jitter_ms": "no jitter in the simulator"}
_EFFECT_NAMES = {"Send": "send", "Deliver": "deliver", "SetTimer": "timer", "Trace": "trace"}


class TraceSink(Protocol):
    def write(self, file: str, t: float, node: str, kind: str, fields: dict[str, Any]) -> None: ...


class SimTargetError(Exception):
    """A call the simulated system cannot carry out (a broker already down, ...)."""


class _Wake:
    """What a suspended coroutine yields: resume me at virtual time `t`."""

    __slots__ = ("t",)

    def __init__(self, t: float) -> None:
        self.t = t

    def __await__(self) -> Generator[_Wake, None, bool]:
        yield self
        return True  # the simulated experiment never stops early: the run just ends


class _Phase:
    """What a coroutine waiting for a reconfiguration phase yields: resume me when it comes,
    with the virtual time it came."""

    __slots__ = ("broker", "phase", "rid")

    def __init__(self, rid: str, phase: str, broker: str | None) -> None:
        self.rid, self.phase, self.broker = rid, phase, broker

    def matches(self, rid: str, phase: str, node: str) -> bool:
        return rid == self.rid and phase == self.phase and self.broker in (None, node)

    def __await__(self) -> Generator[_Phase, float, float | None]:
        t = yield self
        return t


def _dead(now: float, event: object) -> list[Any]:
    return []  # a killed broker: every event is lost


class SimTarget:
    kind = "sim"

    def __init__(self, *, engine: Engine, brokers: dict[str, Broker], clients: Clients | None,
                 tree: Tree, params: Params, trace: TraceSink | None,
                 start: float = 0.0, roms: Mapping[str, Rom] | None = None) -> None:
        self.engine = engine
        self.brokers = brokers  # shared with the run's monitors: a restart replaces the value
        # what a restart boots each broker with (shared with the simulation, which follows the
        # reconfigurations); None: the ROM it was running with
        self.roms = roms
        self.clients = clients
        self.tree = tree  # as it is now: it follows the reconfigurations (`tree_changed`)
        self.params = params
        self.trace = trace
        self.start = start  # the experiment's t = 0 in virtual time
        self._shapes: dict[tuple[str, str], dict[str, float]] = {}
        self._cuts: dict[tuple[str, str], int] = {}  # undirected link -> open cuts
        self._paused: dict[str, list[tuple[str, str]]] = {}
        self._down: set[str] = set()
        self._phases: list[tuple[float, str, str, str]] = []  # (t, rid, phase, node) seen
        self._waiting: list[tuple[_Phase, Coroutine[Any, Any, Any]]] = []

    def tree_changed(self, _t: float, tree: PlanTree) -> None:
        """The manager's tree after a reconfiguration: the faults that strike from now on
        resolve their selectors against it (the live target reads its testbed's, the same
        `Tree.follow`)."""
        self.tree = self.tree.follow(tree.nodes, tree.edges)

    # ---- the clock --------------------------------------------------------------------------

    def elapsed(self) -> float:
        return self.engine.now - self.start

    def sleep_until(self, t: float) -> _Wake:
        return _Wake(self.start + t)

    def stopping(self) -> bool:
        return False

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        self._resume(self.engine.now, work, None)

    def _resume(self, now: float, work: Coroutine[Any, Any, Any], value: Any) -> None:
        try:
            wake = work.send(value)
        except StopIteration:
            return
        if isinstance(wake, _Phase):
            seen = next((t for t, rid, phase, node in self._phases
                         if wake.matches(rid, phase, node)), None)
            if seen is not None:  # already past: at once
                self.engine.schedule(now, self._resume, work, seen - self.start)
            else:
                self._waiting.append((wake, work))
            return
        self.engine.schedule(wake.t, self._resume, work)

    def wait_phase(self, rid: str, phase: str, broker: str | None) -> _Phase:
        return _Phase(rid, phase, broker)

    def observe(self, t: float, node: str, kind: str, fields: dict[str, Any]) -> None:
        """A trace record of the run: a reconfiguration phase resumes the faults waiting for
        it (`during`), right after the step that recorded it, at the same virtual instant."""
        if kind != "reconfig" and kind != "reconfiguration":
            return
        rid, phase = str(fields.get("rid")), str(fields.get("phase"))
        self._phases.append((t, rid, phase, node))
        ready = [w for w in self._waiting if w[0].matches(rid, phase, node)]
        for w in ready:
            self._waiting.remove(w)
            self.engine.schedule(t, self._resume, w[1], t - self.start)

    def record(self, kind: str, at: float, fields: dict[str, Any]) -> None:
        if self.trace is not None:
            self.trace.write(CHAOS, self.start + at, CHAOS, kind, fields)

    # ---- brokers ----------------------------------------------------------------------------

    def rom(self, broker: str) -> Rom:
        return self.brokers[broker].rom

    async def snapshot(self, broker: str) -> dict[str, Any]:
        return self.brokers[broker].snapshot()

    async def corrupt(self, broker: str, *, field: str, value: Any, args: dict[str, Any],
                      fault_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
        self._alive(broker)
        before = self.brokers[broker].snapshot()
        self.engine.inject(self.engine.now, broker, Corrupt(field, value, args))
        return before, self.brokers[broker].snapshot()

    async def inject(self, src: str, dst: str, message: Message,
                     fault_id: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, int]]:
        self._alive(dst)
        before = self.brokers[dst].snapshot()
        effects = self.engine.inject(self.engine.now, dst, Receive(src, message))
        tally: dict[str, int] = {}
        for e in effects:
            name = _EFFECT_NAMES.get(type(e).__name__, type(e).__name__.lower())
            tally[name] = tally.get(name, 0) + 1
        return before, self.brokers[dst].snapshot(), tally

    def _alive(self, broker: str) -> None:
        if broker in self._down:
            raise SimTargetError("not running")

    def _node(self, broker: str) -> Node:
        return self.engine.nodes[broker]

    async def kill(self, broker: str) -> dict[str, Any]:
        self._alive(broker)
        self._down.add(broker)
        self._node(broker).step = _dead
        return {"running": False, "sim": "takes no events until restarted"}

    async def restart(self, broker: str) -> dict[str, Any]:
        if broker not in self._down:
            raise SimTargetError("still running")
        self._down.discard(broker)
        old = self.brokers[broker]
        rom = old.rom if self.roms is None else self.roms.get(broker, old.rom)
        fresh = Broker(rom, old.keys)  # the ROM it boots with now, empty RAM; the run's cache
        self.brokers[broker] = fresh
        node = self._node(broker)
        node.broker, node.step = fresh, fresh.step
        self.engine.inject(self.engine.now, broker, Start())
        return {"running": True, "entries": 0, "sim": "fresh core, Start"}

    async def pause(self, broker: str, duration: float | None) -> dict[str, Any]:
        self._alive(broker)
        links = [link for link in self._directed() if broker in link]
        # what is sent over its links during the pause arrives when it ends, as a stopped
        # process reads its socket on resuming (a delay of the whole duration brought messages
        # sent late in the pause in long after it, out of the timing model)
        until = self.engine.now + (duration or 0.0)
        for a, b in links:
            self.engine.set_link_fault(a, b, both_ways=False, hold_until=until)
        self._paused[broker] = links
        return {"paused": True, "sim": f"links held until {until:g} s"}

    async def resume(self, broker: str) -> dict[str, Any]:
        for a, b in self._paused.pop(broker, []):
            self.engine.set_link_fault(a, b, both_ways=False, clear_hold=True)
            self._apply(a, b)
        return {"paused": False, "sim": "links back to their delays"}

    def is_paused(self, broker: str) -> bool:
        return broker in self._paused

    def _directed(self) -> list[tuple[str, str]]:
        return [d for a, b in self.tree.links for d in ((a, b), (b, a))]

    # ---- links ------------------------------------------------------------------------------

    async def link_shape(self, a: str, b: str) -> dict[str, float]:
        self.tree.link(a, b)
        return dict(self._shapes.get((a, b)) or dict.fromkeys(_SHAPE_KEYS, 0.0))

    async def shape(self, a: str, b: str, change: dict[str, float]) -> dict[str, float]:
        shape = self._shapes.setdefault((a, b), dict.fromkeys(_SHAPE_KEYS, 0.0))
        shape.update(change)
        self._apply(a, b)
        notes = [note for key, note in _APPROXIMATE.items() if shape.get(key)]
        return {**shape, **({"sim": "; ".join(notes)} if notes else {})}

    async def cut(self, a: str, b: str, cut: bool) -> tuple[bool, dict[str, Any]]:
        key = (min(a, b), max(a, b))
        was_cut = self._cuts.get(key, 0) > 0
        # cuts nest (a partition and a flap across one link), but a heal undoes every one
        self._cuts[key] = self._cuts.get(key, 0) + 1 if cut else 0
        self._apply(a, b)
        self._apply(b, a)
        is_cut = self._cuts[key] > 0
        if is_cut != was_cut:  # both ends notice (the anti-entropy mode's timers act on it)
            self.engine.report_link(a, b, up=not is_cut)
        return is_cut, {"cut": is_cut, "mechanism": "sim"}

    def _apply(self, a: str, b: str) -> None:
        """The engine's fault settings of direction a -> b from its shaping and cuts."""
        shape = self._shapes.get((a, b)) or {}
        cut = self._cuts.get((min(a, b), max(a, b)), 0) > 0
        # a garbled envelope rarely decodes: the receiver drops it (see the module docstring)
        loss = 1.0 - (1.0 - shape.get("loss", 0.0)) * (1.0 - shape.get("corrupt", 0.0))
        delay = shape.get("delay_ms", 0.0)
        self.engine.set_link_fault(a, b, both_ways=False, drop=1.0 if cut else loss,
                                   duplicate=shape.get("duplicate", 0.0),
                                   delay=delay / 1000 if delay else None,
                                   clear_delay=not delay)

    # ---- clients ----------------------------------------------------------------------------

    def _clients(self) -> Clients:
        if self.clients is None:
            raise SimTargetError("no simulated clients")
        return self.clients

    async def subscribe_client(self, client: str, broker: str, filter_text: str) -> ClientSub:
        return self._clients().subscribe(self.engine.now, client, broker,
                                         Filter.parse(filter_text))

    async def crash_client(self, handle: ClientSub) -> dict[str, Any]:
        if not handle.live:
            raise SimTargetError(f"{handle.client} is not subscribed")
        self._clients().crash(self.engine.now, handle)
        return {"client": handle.client, "sub_id": handle.sub_id}

    def subscribers(self) -> list[str]:
        if self.clients is None:
            return []
        return list(dict.fromkeys(s.client for s in self.clients.live.values()))

    async def crash_subscriber(self, client: str) -> dict[str, Any]:
        clients = self._clients()
        subs = [s for s in clients.live.values() if s.client == client]
        if not subs:
            raise SimTargetError(f"{client} has no live subscription")
        for s in subs:
            clients.crash(self.engine.now, s)
        return {"sub_ids": [s.sub_id for s in subs], "brokers": sorted({s.broker for s in subs})}
