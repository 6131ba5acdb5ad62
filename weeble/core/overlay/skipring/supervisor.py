"""The supervisor of one topic (seed 003 §3.1, §3.3, §4.1): the database of labels.

RAM: `db` maps a label index to a subscriber id (None is a tuple without a subscriber, condition
1 of §3.1; a map keyed by label rules out duplicate and ⊥ labels), `next` is the round-robin
counter, `dead` the failure detector's view. The sorted views below are an index over `db`,
rebuilt whenever RAM is written from outside (`load`).

Repairs are local and send nothing (R1–R3 of spec seed23 §A.5); subscribe costs 1 message,
unsubscribe 2, and the periodic Timeout exactly 1 Config per topic.

Failure detection (spec seed23 §A.8 [D]): ring neighbours report silence (Suspect); the supervisor
probes the suspect and removes it if it has not asked for its configuration within CONFIRM_AFTER
Timeouts, so detection costs O(1) per crash instead of a heartbeat per subscriber. An external
detector (`failure_report`) may add to `dead` too.

Choices where the paper is silent or lost (spec seed23 §A.13): R2 keeps the lowest *index*; a crash
reported by the failure detector is handled like an unsubscribe without the grant (the newest
tuple takes the freed label and is told at once: 1 message, instead of waiting up to n Timeouts
for R3 and the round robin); ConfigRequestFor about a node the detector holds dead is answered with
NotMember (spec seed23 §A.8), and so is one about a node that unsubscribed (a stale reference as
a crashed node's is; its own Subscribe or ConfigRequest takes it back).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable

from weeble.core.events import Send
from weeble.core.overlay.skipring.labels import check_label, position
from weeble.core.overlay.skipring.messages import (
    Config,
    ConfigRequest,
    ConfigRequestFor,
    NotMember,
    Probe,
    Publish,
    PublishNew,
    Ref,
    Subscribe,
    SupervisorMessage,
    Suspect,
    Unsubscribe,
)

CONFIRM_AFTER = 8  # supervisor Timeouts a probed node has to answer (2 member intervals at 4×)


class TopicSupervisor:
    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.db: dict[int, str | None] = {}
        self.next = 0
        self.dead: set[str] = set()
        self.suspects: dict[str, int] = {}  # probed node -> Timeouts left to answer
        self._reindex()

    # ---- RAM and its index ---------------------------------------------------------------------

    def load(self, *, db: dict[int, str | None], next_: int = 0,
             dead: Iterable[str] = (), suspects: dict[str, int] | None = None) -> None:
        """Overwrite RAM (an arbitrary state, e.g. from a corruption) and reindex."""
        self.db = {check_label(i): v for i, v in db.items()}
        self.next = next_
        self.dead = set(dead)
        self.suspects = {u: max(0, min(int(k), CONFIRM_AFTER)) for u, k in (suspects or {}).items()}
        self._reindex()

    def _reindex(self) -> None:
        self._order = sorted((position(i), i) for i in self.db)
        self._indices = sorted(self.db)
        self._by_sub: dict[str, set[int]] = {}
        self._nones = 0
        for i, v in self.db.items():
            if v is None:
                self._nones += 1
            else:
                self._by_sub.setdefault(v, set()).add(i)

    def _put(self, i: int, v: str) -> None:
        old = self.db.get(i, ...)
        if old is not ...:
            self._drop(i)
        self.db[i] = v
        insort(self._order, (position(i), i))
        insort(self._indices, i)
        self._by_sub.setdefault(v, set()).add(i)

    def _drop(self, i: int) -> str | None:
        v = self.db.pop(i)
        self._order.pop(bisect_left(self._order, (position(i), i)))
        self._indices.pop(bisect_left(self._indices, i))
        if v is None:
            self._nones -= 1
        else:
            s = self._by_sub[v]
            s.discard(i)
            if not s:
                del self._by_sub[v]
        return v

    # ---- queries -------------------------------------------------------------------------------

    @property
    def n(self) -> int:
        return len(self.db)

    def label_of(self, v: str) -> int | None:
        s = self._by_sub.get(v)
        return min(s) if s else None

    def members(self) -> dict[str, int]:
        return {v: min(s) for v, s in self._by_sub.items()}

    def corrupted(self) -> bool:
        """Any of the four conditions of §3.1 (duplicates counted per subscriber)."""
        n = self.n
        return bool(self._nones or (n and self._indices[-1] != n - 1)
                    or any(len(s) > 1 for s in self._by_sub.values()))

    def _config(self, i: int) -> Config:
        k = bisect_left(self._order, (position(i), i))
        n = len(self._order)
        _, pi = self._order[(k - 1) % n]
        _, si = self._order[(k + 1) % n]
        pv, sv = self.db[pi], self.db[si]
        return Config(topic=self.topic, label=i,
                      pred=None if pv is None else Ref(pv, pi),
                      succ=None if sv is None else Ref(sv, si))

    # ---- repairs (local, no messages) ----------------------------------------------------------

    def _r1(self) -> None:
        if self._nones:
            for i in [i for i, v in self.db.items() if v is None]:
                self._drop(i)

    def _r2(self, v: str) -> None:
        s = self._by_sub.get(v)
        if s and len(s) > 1:
            keep = min(s)
            for i in sorted(s - {keep}):
                self._drop(i)

    def _r3(self) -> None:
        n = self.n
        if not n or self._indices[-1] == n - 1:
            return
        for i in range(n):
            if i not in self.db:
                top = self._indices[-1]
                v = self._drop(top)
                if v is not None:
                    self._put(i, v)

    def _remove(self, v: str) -> list[Send]:
        """v leaves (or crashed): the newest tuple takes v's label and is told so."""
        i = self.label_of(v)
        if i is None:
            return []
        self._r2(v)
        self._drop(i)
        if not self.n or self._indices[-1] < i:
            return []
        top = self._indices[-1]
        w = self._drop(top)
        if w is None:
            return []
        self._put(i, w)
        return [Send(w, self._config(i))]

    # ---- handlers ------------------------------------------------------------------------------

    def timeout(self) -> list[Send]:
        out: list[Send] = []
        for u in sorted(self.suspects):
            self.suspects[u] -= 1
            if self.suspects[u] <= 0:  # no answer to the probe: crashed
                del self.suspects[u]
                self.dead.add(u)
                out.extend(self._remove(u))
        self._r1()
        self._r3()
        return out + self._round_robin()

    def _round_robin(self) -> list[Send]:
        n = self.n
        if not n:
            return []
        i = self.next % n
        self.next = (i + 1) % n
        v = self.db.get(i)
        if v is None:  # unreachable after R1/R3; kept so a bad state cannot raise
            return []
        self._r2(v)
        return [Send(v, self._config(self.label_of(v)))]  # type: ignore[arg-type]

    def _configure(self, v: str, *, own: bool) -> list[Send]:
        """Configure v; `own` when v asked itself, which proves it alive."""
        if own:
            self.dead.discard(v)
            self.suspects.pop(v, None)
        elif v in self.dead:
            return []
        self._r2(v)
        if self.label_of(v) is None:
            self._r1()
            self._r3()
            self._put(self.n, v)
        return [Send(v, self._config(self.label_of(v)))]  # type: ignore[arg-type]

    def receive(self, msg: SupervisorMessage) -> list[Send]:
        match msg:
            case Subscribe(node=v) | ConfigRequest(node=v):
                return self._configure(v, own=True)
            case Suspect(node=v, about=u):
                if u in self.dead:
                    return [Send(v, NotMember(topic=self.topic, node=u)), *self._recheck(u)]
                if u in self._by_sub and u not in self.suspects:
                    self.suspects[u] = CONFIRM_AFTER
                    return [Send(u, Probe(topic=self.topic))]
                return []
            case ConfigRequestFor(node=v, about=u):
                if u in self.dead:
                    return [Send(v, NotMember(topic=self.topic, node=u)), *self._recheck(u)]
                return self._configure(u, own=False)
            case Publish(node=v, pub=pub):
                entry = self.db.get(0)
                if entry is None:  # no member: nobody is subscribed to hold it
                    return []
                return [Send(entry, PublishNew(topic=self.topic, node=v, pub=pub))]
            case Unsubscribe(node=v):
                out = self._remove(v)
                # a node that left is a stale reference at its ring neighbours, as a crashed one
                # is: their action (iii) about it gets NotMember, not a re-insertion (which the
                # leaver answers with another Unsubscribe, relabelling the ring at each round:
                # a publication flooded meanwhile reached only the leaver, explore seed 186 of
                # the flag-rule shape); its own Subscribe or ConfigRequest clears this
                self.dead.add(v)
                out.append(Send(v, Config(topic=self.topic, label=None, pred=None, succ=None)))
                return out
        raise ValueError(f"not a supervisor message: {type(msg).__name__}")

    def _recheck(self, u: str) -> list[Send]:
        """Someone still talks of u, which the detector holds dead: probe it once (a live u
        answers with its own ConfigRequest, which clears the verdict). Without this a wrong
        `dead` entry (a corrupted view) is cleared only when u asks by itself, which a node with
        a long label does with probability 4^-k per interval: n = 64 never converged from a
        corrupted database with the plausibility check off (benchmarks/seed003_skipring.py)."""
        if u in self.suspects:
            return []
        self.suspects[u] = CONFIRM_AFTER
        return [Send(u, Probe(topic=self.topic))]

    def failure_report(self, dead: Iterable[str]) -> list[Send]:
        """An external failure detector's view (eventually correct): drop the crashed."""
        self.dead |= set(dead)
        out: list[Send] = []
        for v in sorted(self.dead & self._by_sub.keys()):
            out.extend(self._remove(v))
        return out
