"""The messages of edge stabilization with sketches (seed 002; layer `anti_entropy`,
sketch/layer.py)."""

from __future__ import annotations

from dataclasses import dataclass

from weeble.core.filters import Filter
from weeble.core.sketch.bloom import BloomFilter

# A subscription as seed 002's tables hold it: (sub_id, filter).
Item = tuple[str, Filter]


@dataclass(slots=True)
class AeObserve:
    """Observer (seed 002 §3.2): round `round_no` of the sender's edge towards the receiver.
    Answer with a sketch of what you hold for me, built with (m, k, seed), or, when `full`,
    with the items themselves."""

    round_no: int
    full: bool
    m: int = 0
    k: int = 0
    seed: int = 0


@dataclass(slots=True)
class AeReply:
    """The answer: |F_{me→observer}| and its Bloom filter (`sketch`), or its items (a full
    round)."""

    round_no: int
    cardinality: int
    sketch: BloomFilter | None = None
    items: tuple[Item, ...] = ()


@dataclass(slots=True)
class AeCorrect:
    """C1 (process as subscriptions from the sender) and C2 (as unsubscriptions); with `probe`
    (the sender's filter of what it advertises) the receiver also drops what it holds for the
    sender that the probe certainly lacks."""

    round_no: int
    subscribe: tuple[Item, ...] = ()
    unsubscribe: tuple[Item, ...] = ()
    probe: BloomFilter | None = None


AntiEntropyMessage = AeObserve | AeReply | AeCorrect
ANTI_ENTROPY = (AeObserve, AeReply, AeCorrect)
