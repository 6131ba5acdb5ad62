"""Handing freed memory back to the system.

glibc's allocator keeps the blocks of freed notifications (200 KB each in the probe) in its
heap, and a broker's RSS would stay at its peak after a slow consumer or a silent link peer
left, or a backlog drained. `malloc_trim(0)` returns the free pages. When to call it is read
from the allocator itself (`mallinfo2`: bytes it holds free), not guessed from the broker's
queues or peers: gRPC frees a cancelled call's buffers when its call ends, seconds after the
peer left on a loaded machine, and a trim on a schedule after the leave could come too early
(CI saw RSS stay at its peak for 20 s). Elsewhere than glibc ≥ 2.33 nothing is trimmed.
"""

from __future__ import annotations

import ctypes
from typing import Any

TRIM_STEP = 8 * 1024 * 1024  # newly free bytes that are worth a trim


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _libc() -> Any:
    global _LIBC
    if _LIBC is None:
        try:
            libc = ctypes.CDLL("libc.so.6")
            libc.malloc_trim.argtypes = [ctypes.c_size_t]
            libc.mallinfo2.restype = _MallInfo2
            _LIBC = libc
        except (OSError, AttributeError):  # not glibc, or older than 2.33
            _LIBC = False
    return _LIBC


_LIBC: Any = None


def free_bytes() -> int | None:
    """Bytes the C allocator holds free in its heaps (every arena), or None off glibc."""
    libc = _libc()
    return int(libc.mallinfo2().fordblks) if libc else None


class MemoryReturner:
    """Trims when the allocator holds TRIM_STEP more free bytes than after the last trim.

    A trim leaves the blocks free (only their pages go back), so the allocator's free count
    does not fall with it; it falls when the blocks are used again, and the baseline follows
    it down, so that what is freed again counts anew."""

    def __init__(self) -> None:
        self.baseline = 0  # free bytes after the last trim, or fewer since
        self.trims = 0

    def sample(self) -> bool:
        """Trim if worth it; True if it did."""
        free = free_bytes()
        if free is None:
            return False
        if free < self.baseline + TRIM_STEP:
            self.baseline = min(self.baseline, free)
            return False
        _libc().malloc_trim(0)
        self.baseline = free
        self.trims += 1
        return True
