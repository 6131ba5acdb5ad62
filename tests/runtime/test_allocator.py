"""The broker hands memory back to the system when the allocator holds enough of it free."""

from __future__ import annotations

import os
from pathlib import Path

from weeble.runtime.allocator import TRIM_STEP, MemoryReturner, free_bytes

MIB = 1024 * 1024


def _rss() -> int:
    for line in Path(f"/proc/{os.getpid()}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _blocks(n: int) -> tuple[list[bytes], list[bytes]]:
    """2n blocks of 100 KB (below glibc's mmap threshold: they live in the heap), every other
    one to be freed: its neighbours stay in use, so it stays a free chunk inside the heap (one
    that reaches the heap's top glibc returns by itself)."""
    freed, kept = [], []
    for _ in range(n):
        freed.append(os.urandom(100_000))  # urandom: its pages are touched, so they are in RSS
        kept.append(os.urandom(100_000))
    return freed, kept


def test_freed_blocks_are_returned_once_and_counted_anew_after_reuse() -> None:
    returner = MemoryReturner()
    returner.sample()  # whatever this process already held free
    trims = returner.trims
    assert free_bytes() is not None  # glibc: the images and CI run on it
    big, keep = _blocks(300)  # 30 MB to free
    held = _rss()
    assert not returner.sample()  # nothing new is free
    del big
    assert free_bytes() >= returner.baseline + TRIM_STEP  # type: ignore[operator]
    assert returner.sample()
    returned = held - _rss()
    assert returned >= 20 * MIB, returned / MIB
    assert not returner.sample()  # the blocks stay free (their pages went): no second trim
    # used again, freed again: counted anew
    big, more = _blocks(300)
    assert not returner.sample()
    del big
    assert returner.sample()
    assert returner.trims == trims + 2
    del keep, more
