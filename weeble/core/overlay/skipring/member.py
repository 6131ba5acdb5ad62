"""A subscriber of one topic (seed 003 §2.2, §3.2, §4): extended BuildRing, the supervisor actions
(i)–(iv), shortcut maintenance and the publication layer (anti-entropy over Patricia tries and
flooding of new publications).

RAM: `label`, the ring slots `left`/`right`/`ring` (each a Ref: id and believed label), the
`shortcuts` (slot label → id), `leaving`, and the publication store. ROM: own id, the topic, the
supervisor's id, the parameters. Randomness (actions (ii), (iv) and the anti-entropy partner) comes
from the seeded `rng` handed in by the owner, so a run is a function of its seed.

Choices where the paper is silent or lost (spec seed23 §A.13, D.4), all parameters:
- p(k) = p_base^{−k} with p_base = 4 and q = 1/2 (the paper's formulas were lost);
- a local plausibility check (spec seed23 §A.13-5): ring neighbours of a legitimate SR(n) lie
  2^{−max(|a|,|b|)} apart; a violation triggers a ConfigRequest, so a corrupted own label is not
  left to the round robin (never fires in a legitimate state);
- a ring neighbour is handed on in a shortcut introduction only if its label is *confirmed*: heard
  from the node itself (its self-introduction or LabelFix) or from the supervisor's Config. Lemma
  2.2's argument (stale stored labels are finite and never duplicated) fails without this: v
  introduced (u, stale y) to w as a shortcut, w handed it back to v by linearization, and v stored
  it again before u's LabelFix arrived, every interval, forever (seen in our convergence runs).
  Shortcut slots are handed on as they are: the levels are rebuilt from the ring down, so once the
  ring is correct every level's introductions are;
- a shortcut introduction for a label outside the receiver's shortcut set is linearized (spec seed23
  §A.13-3 default; `linearize_foreign_shortcuts=False` drops it, also safe under a supervisor), and
  so is a slot holder displaced by a new introduction (the paper's rule);
- a node that is not (or no longer) a member answers an Introduce with RemoveMe and a Config with
  Unsubscribe. The supervisor answers action (iii) about a node that left with NotMember, as
  about a crashed one; the Unsubscribe covers a re-insertion all the same (a corrupted database,
  a request on its way before the leave), and the node itself says it is not subscribed;
- push_hints (spec seed23 §A.11 improvements): a CheckTrie reply names its parent node, so the
receiver can
  push what the sender lacks, and an empty trie asks for everything; off = the paper's pull-only
  rules, under which a single missing publication is repaired in only one initiation direction.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from weeble.core.events import Send
from weeble.core.overlay.skipring.labels import (
    check_label,
    length,
    plausible_pair,
    position,
    shortcut_labels,
    step,
)
from weeble.core.overlay.skipring.messages import (
    CheckAndPublish,
    CheckTrie,
    Config,
    ConfigRequest,
    ConfigRequestFor,
    DeliverPublications,
    Introduce,
    IntroduceShortcut,
    LabelFix,
    MemberMessage,
    NotMember,
    Probe,
    Publish,
    PublishNew,
    Ref,
    RemoveMe,
    SendPrefix,
    Subscribe,
    Suspect,
    Unsubscribe,
)
from weeble.core.overlay.skipring.trie import Prefix, Publication, PublicationTrie, Summary


@dataclass(frozen=True, slots=True)
class MemberParams:
    p_base: float = 4.0
    q: float = 0.5
    plausibility: bool = True
    push_hints: bool = True
    flood: bool = True
    linearize_foreign_shortcuts: bool = True
    suspect_after: int = 3  # silent intervals of a ring neighbour before a Suspect (0 = never)

    def __post_init__(self) -> None:
        if self.p_base < 1 or not 0 <= self.q <= 1:
            raise ValueError(f"need p_base >= 1 and 0 <= q <= 1, got {self}")


@dataclass(frozen=True, slots=True)
class Delivered:
    """Effect: a publication of `topic` is new at this node (hand it to the local subscribers)."""

    topic: str
    pub: Publication


Key = tuple[int, str]


def _key(ref: Ref) -> Key:
    return (position(ref.label), ref.node)


def _between(a: Key, x: Key, b: Key) -> bool:
    """x strictly inside the cyclic interval from a up to b."""
    if a < b:
        return a < x < b
    if a > b:
        return x > a or x < b
    return x != a


@dataclass(slots=True)
class _Out:
    sends: list[Send | Delivered] = field(default_factory=list)

    def send(self, to: str, msg: object) -> None:
        self.sends.append(Send(to, msg))  # type: ignore[arg-type]


class TopicMember:
    def __init__(self, *, topic: str, me: str, supervisor: str, rng: random.Random,
                 params: MemberParams | None = None) -> None:
        self.topic, self.me, self.supervisor = topic, me, supervisor
        self.rng = rng
        self.params = params or MemberParams()
        self.active = False
        self.leaving = False
        self.label: int | None = None
        self.left: Ref | None = None
        self.right: Ref | None = None
        self.ring: Ref | None = None
        self.shortcuts: dict[int, str] = {}
        # labels heard first-hand: from the node itself (its self-introduction, its LabelFix) or
        # from the supervisor's Config; a ring edge is handed on only with a confirmed label
        self.confirmed: dict[str, int] = {}
        # intervals since each ring neighbour last introduced itself (failure detection)
        self.silent: dict[str, int] = {}
        self.store = PublicationTrie()

    # ---- client side ---------------------------------------------------------------------------

    def subscribe(self) -> list[Send | Delivered]:
        self.active, self.leaving = True, False
        return [Send(self.supervisor, Subscribe(topic=self.topic, node=self.me))]  # type: ignore[arg-type]

    def unsubscribe(self) -> list[Send | Delivered]:
        if not self.active:
            return []
        self.leaving = True
        return [Send(self.supervisor, Unsubscribe(topic=self.topic, node=self.me))]  # type: ignore[arg-type]

    def publish(self, pub: Publication) -> list[Send | Delivered]:
        out = _Out()
        if self.store.insert(pub):
            out.sends.append(Delivered(self.topic, pub))
            if self.label is None:
                # joining: no edge yet (the Config is on its way), so flooding reaches nobody,
                # and a member that leaves before anti-entropy has run takes its publication
                # along. Hand it to the supervisor as a non-member does, for r(0) to spread
                # (sweep seeds 285, 843, 932: lost for every other member)
                out.send(self.supervisor, Publish(topic=self.topic, node=self.me, pub=pub))
            elif self.params.flood:
                for nb in sorted(self.neighbours()):
                    out.send(nb, PublishNew(topic=self.topic, node=self.me, pub=pub))
        return out.sends

    # ---- views ---------------------------------------------------------------------------------

    @property
    def member(self) -> bool:
        return self.active and not self.leaving

    def own_key(self) -> Key:
        return (position(self.label), self.me)  # type: ignore[arg-type]

    def pred(self) -> Ref | None:
        if self.left is not None:
            return self.left
        if self.ring is not None and self.label is not None and _key(self.ring) > self.own_key():
            return self.ring
        return None

    def succ(self) -> Ref | None:
        if self.right is not None:
            return self.right
        if self.ring is not None and self.label is not None and _key(self.ring) < self.own_key():
            return self.ring
        return None

    def neighbours(self) -> set[str]:
        """Every node this one holds an explicit edge to."""
        out = {r.node for r in (self.left, self.right, self.ring) if r is not None}
        out.update(self.shortcuts.values())
        out.discard(self.me)
        return out

    def shortcut_set(self) -> set[int]:
        if self.label is None:
            return set()
        p, s = self.pred(), self.succ()
        return shortcut_labels(self.label, None if p is None else p.label,
                               None if s is None else s.label)

    # ---- linearization (BuildRing) -------------------------------------------------------------

    def _forget(self, node: str) -> None:
        if self.left is not None and self.left.node == node:
            self.left = None
        if self.right is not None and self.right.node == node:
            self.right = None
        if self.ring is not None and self.ring.node == node:
            self.ring = None
        for lab in [lab for lab, v in self.shortcuts.items() if v == node]:
            del self.shortcuts[lab]
        self.confirmed.pop(node, None)

    def _linearize(self, ref: Ref, out: _Out) -> None:
        """Keep ref if it is closer than the stored neighbour on its side, else delegate it."""
        if ref.node == self.me or self.label is None:
            return
        ku, own = _key(ref), self.own_key()
        for slot in ("left", "right"):
            cur = getattr(self, slot)
            if cur is not None and cur.node == ref.node:
                if (slot == "left") == (ku < own):
                    setattr(self, slot, ref)  # the same node: refresh its label
                    return
                setattr(self, slot, None)  # it moved to the other side
        slot = "left" if ku < own else "right"
        cur = getattr(self, slot)
        if cur is None:
            setattr(self, slot, ref)
            return
        closer = ku > _key(cur) if slot == "left" else ku < _key(cur)
        if closer:
            setattr(self, slot, ref)
            out.send(ref.node, Introduce(topic=self.topic, node=cur.node, label=cur.label))
        else:
            out.send(cur.node, Introduce(topic=self.topic, node=ref.node, label=ref.label))

    def _set_ring(self, ref: Ref, out: _Out) -> None:
        old = self.ring
        self.ring = ref
        if old is not None and old.node != ref.node:
            self._linearize(old, out)

    def _check_sides(self, out: _Out) -> None:
        """BuildRing's invariant on the stored ring slots: `left` below our own key, `right`
        above it, neither ourselves. A slot that breaks it (only corrupted RAM or a stale label
        does) is emptied and its node linearized anew; without this a self-reference, or a
        neighbour on the wrong side whose label is right, stays forever: every closer candidate
        is delegated to it (to ourselves: nowhere), and no LabelFix ever comes."""
        own = self.own_key()
        for slot in ("left", "right"):
            cur = getattr(self, slot)
            if cur is None:
                continue
            if cur.node == self.me or (slot == "left") != (_key(cur) < own):
                setattr(self, slot, None)
                self._linearize(cur, out)  # a self-reference goes nowhere

    def _check_ring(self, out: _Out) -> None:
        r = self.ring
        if r is None:
            return
        kr, own = _key(r), self.own_key()
        if r.node == self.me or (kr > own and self.left is not None) or (
                kr < own and self.right is not None):
            self.ring = None
            self._linearize(r, out)

    def _offer_ring(self, ref: Ref, out: _Out) -> None:
        """A periodic introduction over the min↔max edge: keep it as the ring edge if we are the
        opposite extreme and it is more extreme than what we hold; else linearize it."""
        ku, own = _key(ref), self.own_key()
        r = self.ring
        if ku < own and self.right is None:
            if r is None or r.node == ref.node or ku < _key(r):
                self._set_ring(ref, out)
                return
        elif ku > own and self.left is None:  # noqa: SIM102 - mirror of the branch above
            if r is None or r.node == ref.node or ku > _key(r):
                self._set_ring(ref, out)
                return
        self._linearize(ref, out)

    # ---- periodic action -----------------------------------------------------------------------

    def timeout(self) -> list[Send | Delivered]:
        out = _Out()
        if not self.member:
            return out.sends
        if self.label is None:  # (i)
            out.send(self.supervisor, ConfigRequest(topic=self.topic, node=self.me))
            return out.sends
        label, p = self.label, self.params
        ask = self.rng.random() < p.p_base ** -length(label)  # (ii)
        if self.left is None and self.rng.random() < p.q:  # (iv)
            ask = True
        self._check_sides(out)
        self._check_ring(out)
        if p.plausibility and not self._plausible():
            ask = True
        if ask:
            out.send(self.supervisor, ConfigRequest(topic=self.topic, node=self.me))
        for ref in (self.left, self.right):
            if ref is not None:
                out.send(ref.node, Introduce(topic=self.topic, node=self.me, label=label,
                                             belief=ref.label))
        if self.ring is not None:
            out.send(self.ring.node, Introduce(topic=self.topic, node=self.me, label=label,
                                               belief=self.ring.label, via_ring=True))
        self._watch_ring(out)
        self._tidy_shortcuts(out)
        held = self.neighbours()
        for node in [node for node in self.confirmed if node not in held]:
            del self.confirmed[node]
        self._introduce_shortcuts(out)
        self._check_trie(out)
        return out.sends

    def _watch_ring(self, out: _Out) -> None:
        """Count intervals without a self-introduction from each ring neighbour; report one that
        stays silent (spec seed23 §A.8: neighbours detect, the supervisor confirms)."""
        k = self.params.suspect_after
        ring = {r.node for r in (self.left, self.right, self.ring) if r is not None}
        self.silent = {u: self.silent.get(u, 0) + 1 for u in ring}
        if k:
            for u in sorted(ring):
                if self.silent[u] % k == 0:
                    out.send(self.supervisor, Suspect(topic=self.topic, node=self.me, about=u))

    def _plausible(self) -> bool:
        pr, su = self.pred(), self.succ()
        own = self.label
        return ((pr is None or plausible_pair(pr.label, own))  # type: ignore[arg-type]
                and (su is None or plausible_pair(own, su.label)))  # type: ignore[arg-type]

    def _tidy_shortcuts(self, out: _Out) -> None:
        for lab in [lab for lab, v in self.shortcuts.items() if v == self.me]:
            del self.shortcuts[lab]  # ourselves: no edge (corrupted RAM)
        sc = self.shortcut_set()
        for lab in [lab for lab in self.shortcuts if lab not in sc]:
            self._linearize(Ref(self.shortcuts.pop(lab), lab), out)

    def _level_neighbour(self, lab: int, side: Ref | None) -> Ref | None:
        if side is not None and side.label == lab:
            return side if self.confirmed.get(side.node) == lab else None
        node = self.shortcuts.get(lab)
        return None if node is None else Ref(node, lab)

    def _introduce_shortcuts(self, out: _Out) -> None:
        """Introduce v's two level-|label| neighbours to each other (they are consecutive on the
        next level down), which builds the shortcut levels from the ring towards level 1."""
        label = self.label
        k = length(label)  # type: ignore[arg-type]
        lo_lab, hi_lab = step(label, k, -1), step(label, k, +1)  # type: ignore[arg-type]
        if lo_lab == hi_lab:
            return
        lo = self._level_neighbour(lo_lab, self.pred())
        hi = self._level_neighbour(hi_lab, self.succ())
        if lo is None or hi is None or lo.node == hi.node:
            return
        out.send(hi.node, IntroduceShortcut(topic=self.topic, node=lo.node, label=lo.label))
        out.send(lo.node, IntroduceShortcut(topic=self.topic, node=hi.node, label=hi.label))

    def _check_trie(self, out: _Out) -> None:
        choices = [r.node for r in (self.pred(), self.succ()) if r is not None]
        if not choices:
            return
        to = choices[0] if len(choices) == 1 else choices[self.rng.randrange(len(choices))]
        root = self.store.root
        if root is not None:
            out.send(to, CheckTrie(topic=self.topic, node=self.me, entries=(root,)))
        elif self.params.push_hints:
            out.send(to, CheckTrie(topic=self.topic, node=self.me, entries=(), empty=True))

    # ---- messages ------------------------------------------------------------------------------

    def receive(self, msg: MemberMessage) -> list[Send | Delivered]:
        """Handle one message; ValueError for a message that cannot be valid (junk)."""
        out = _Out()
        match msg:
            case Config():
                self._on_config(msg, out)
            case Introduce():
                self._on_introduce(msg, out)
            case IntroduceShortcut():
                self._on_shortcut(msg, out)
            case LabelFix(node=w, label=lab):
                check_label(lab)
                self._on_label_fix(w, lab, out)
            case NotMember(node=u) | RemoveMe(node=u):
                self._forget(u)
            case Probe():
                if self.member:
                    out.send(self.supervisor, ConfigRequest(topic=self.topic, node=self.me))
            case PublishNew(node=u, pub=pub) if not self.member:
                # the supervisor handed a non-member's publication to us as r(0) while we
                # were leaving: no member holds it yet, so hand it back (once: a second
                # bounce names us and stops) for the member that holds r(0) now
                if u != self.me:
                    out.send(self.supervisor, Publish(topic=self.topic, node=self.me, pub=pub))
            case PublishNew(node=u, pub=pub):
                if self.store.insert(pub):
                    out.sends.append(Delivered(self.topic, pub))
                    if self.params.flood:
                        for nb in sorted(self.neighbours() - {u}):
                            out.send(nb, PublishNew(topic=self.topic, node=self.me, pub=pub))
            case DeliverPublications(pubs=pubs):
                if self.member:
                    for pub in pubs:
                        if self.store.insert(pub):
                            out.sends.append(Delivered(self.topic, pub))
            case CheckTrie():
                self._on_check_trie(msg, out)
            case CheckAndPublish(node=u, summary=summary, prefix=prefix):
                if self.member:
                    self._check_one(u, summary, out)
                    self._deliver(u, self.store.under(prefix, excluding=summary.label), out)
            case SendPrefix(node=u, prefix=prefix):
                if self.member:
                    self._deliver(u, self.store.under(prefix), out)
            case _:
                raise ValueError(f"not a skip-ring member message: {type(msg).__name__}")
        return out.sends

    def _on_config(self, msg: Config, out: _Out) -> None:
        if msg.label is None:  # the unsubscribe grant
            if self.leaving:
                self.drop()
            return
        if not self.member:
            out.send(self.supervisor, Unsubscribe(topic=self.topic, node=self.me))
            return
        check_label(msg.label)
        for r in (msg.pred, msg.succ):
            if r is not None:
                check_label(r.label)
        changed = msg.label != self.label
        self.label = msg.label
        if changed:  # our position moved: re-place every stored ring edge
            held = [r for r in (self.left, self.right, self.ring) if r is not None]
            self.left = self.right = self.ring = None
            for r in held:
                self._linearize(r, out)
        own, p, s = self.own_key(), msg.pred, msg.succ
        for r in (p, s):
            if r is not None:
                self.confirmed[r.node] = r.label
        # (iii): a neighbour closer than the configured one is not recorded (or is stale)
        if self.left is not None and p is not None and _between(_key(p), _key(self.left), own):
            out.send(self.supervisor, ConfigRequestFor(topic=self.topic, node=self.me,
                                                       about=self.left.node))
        if self.right is not None and s is not None and _between(own, _key(self.right), _key(s)):
            out.send(self.supervisor, ConfigRequestFor(topic=self.topic, node=self.me,
                                                       about=self.right.node))
        if p is not None and p.node != self.me:
            if _key(p) > own:
                self._set_ring(p, out)
            else:
                self._linearize(p, out)
        if s is not None and s.node != self.me:
            if _key(s) < own:
                self._set_ring(s, out)
            else:
                self._linearize(s, out)

    def _on_introduce(self, msg: Introduce, out: _Out) -> None:
        check_label(msg.label)
        if msg.belief is not None:
            check_label(msg.belief)
        if not self.member:
            out.send(msg.node, RemoveMe(topic=self.topic, node=self.me))
            return
        if self.label is None:
            return  # cannot place anyone before we know our own label; Config will come
        if msg.belief is not None:  # a self-introduction: first-hand label, and a sign of life
            self.confirmed[msg.node] = msg.label
            self.silent[msg.node] = 0
            if msg.belief != self.label:
                out.send(msg.node, LabelFix(topic=self.topic, node=self.me, label=self.label))
        ref = Ref(msg.node, msg.label)
        if msg.via_ring:
            self._offer_ring(ref, out)
        else:
            self._linearize(ref, out)

    def _on_shortcut(self, msg: IntroduceShortcut, out: _Out) -> None:
        check_label(msg.label)
        if not self.member or self.label is None or msg.node == self.me:
            return
        if msg.label in self.shortcut_set():
            old = self.shortcuts.get(msg.label)
            self.shortcuts[msg.label] = msg.node
            if old is not None and old != msg.node:
                self._linearize(Ref(old, msg.label), out)
        elif self.params.linearize_foreign_shortcuts:
            self._linearize(Ref(msg.node, msg.label), out)

    def _on_label_fix(self, w: str, lab: int, out: _Out) -> None:
        if not self.member or self.label is None:
            return
        self.confirmed[w] = lab
        if self.ring is not None and self.ring.node == w:
            self.ring = Ref(w, lab)
        for slot in ("left", "right"):
            cur = getattr(self, slot)
            if cur is not None and cur.node == w:
                setattr(self, slot, None)
                self._linearize(Ref(w, lab), out)
        stale = [s for s, v in self.shortcuts.items() if v == w and s != lab]
        for s in stale:
            del self.shortcuts[s]
        if stale:
            if lab in self.shortcut_set():
                self.shortcuts[lab] = w
            else:
                self._linearize(Ref(w, lab), out)

    # ---- anti-entropy over tries ---------------------------------------------------------------

    def _deliver(self, to: str, pubs: list[Publication], out: _Out) -> None:
        if pubs:
            out.send(to, DeliverPublications(topic=self.topic, pubs=tuple(pubs)))

    def _on_check_trie(self, msg: CheckTrie, out: _Out) -> None:
        if not self.member:
            return
        u = msg.node
        if msg.empty and self.params.push_hints:
            self._deliver(u, list(self.store), out)
            return
        for e in msg.entries:
            self._check_one(u, e, out)
        if msg.parent is not None and self.params.push_hints:
            self._push_missing(u, msg.parent, msg.entries, out)

    def _check_one(self, u: str, e: Summary, out: _Out) -> None:
        x = self.store.find(e.label)
        if x is not None:
            if x.hash != e.hash and x.children is not None:
                out.send(u, CheckTrie(topic=self.topic, node=self.me,
                                      entries=self.store.child_summaries(x),
                                      parent=x.label if self.params.push_hints else None))
            return
        y = self.store.shortest_with_prefix(e.label)
        if y is not None:
            out.send(u, CheckAndPublish(topic=self.topic, node=self.me,
                                        summary=self.store.summary(y), prefix=e.label))
        else:
            out.send(u, SendPrefix(topic=self.topic, node=self.me, prefix=e.label))

    def _push_missing(self, u: str, parent: Prefix, entries: tuple[Summary, ...],
                      out: _Out) -> None:
        """The sender listed the children of its node `parent`; push what it lacks under ours."""
        x = self.store.find(parent)
        if x is None or x.children is None:
            return
        push: list[Publication] = []
        for c in x.children:
            rel = [e.label for e in entries
                   if e.label.is_prefix_of(c.label) or c.label.is_prefix_of(e.label)]
            if not rel:
                push.extend(self.store.under(c.label))
            elif c.label.length < rel[0].length:
                push.extend(self.store.under(c.label, excluding=rel[0]))
        self._deliver(u, push, out)

    # ---- leaving ------------------------------------------------------------------------------

    def drop(self) -> None:
        """Leave the overlay (after the unsubscribe grant): no label, no edges. The publication
        store stays (our choice; the paper drops the instance): a broker that joins the topic
        again is warm, and anti-entropy only fills the gap instead of the whole history."""
        self.active = self.leaving = False
        self.label = self.left = self.right = self.ring = None
        self.shortcuts = {}
        self.confirmed = {}
        self.silent = {}
