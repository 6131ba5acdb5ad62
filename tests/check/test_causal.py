"""R15's "reordered" counts each reordering once: a FIFO violation (R7) is a causal violation
too, and `Causal` counts only the causal violations beyond it."""

from __future__ import annotations

from weeble.check.causal import Causal


def test_a_fifo_reordering_is_not_counted_again_as_causal() -> None:
    c = Causal()
    c.publish("p", ("p", 1))
    c.publish("p", ("p", 2))
    assert c.deliver(1.0, "x", ("p", 2)) is False
    assert c.deliver(2.0, "x", ("p", 1)) is False  # FIFO: R7 counts it
    assert c.count == 0


def test_a_reordering_across_publishers_is_causal() -> None:
    c = Causal()
    c.publish("p", ("p", 1))
    assert c.deliver(1.0, "q", ("p", 1)) is False
    c.publish("q", ("q", 1))  # q published after it received p#1: p#1 -> q#1
    assert c.deliver(2.0, "x", ("q", 1)) is False
    assert c.deliver(3.0, "x", ("p", 1)) is True  # p#1 after q#1: causal, not FIFO
    assert c.count == 1 and list(c.times) == [3.0]
