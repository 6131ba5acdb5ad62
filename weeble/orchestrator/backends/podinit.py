"""The first process of a broker pod: start the broker as its child, pass it SIGTERM and
SIGINT, reap orphans, exit with its status.

Why: without a shared process namespace the container's command is pid 1 of its namespace,
and the kernel lets no process of the namespace stop pid 1 (SIGSTOP to init is dropped). A
pause fault must stop the broker for real, the kernel's stop, as on the other backends (SIGSTOP
locally, the cgroup freezer in Docker): a broker that only blocked its own event loop would
still have gRPC's core threads answering HTTP/2 pings and accepting connections, and its
peers would not see a stopped process. With this as pid 1 the broker is an ordinary process:
the orchestrator's exec, running as the same non-root user, SIGSTOPs and SIGCONTs it (a
process may signal its own user's processes: no capability, no shared namespace, no root).

    python -m weeble.orchestrator.backends.podinit PROGRAM ARG...
    python -m weeble.orchestrator.backends.podinit --check     # the image build's smoke test
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from types import FrameType

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)


def run(argv: list[str]) -> int:
    """Run `argv` as the child; its exit status (128 + signal when a signal ended it)."""
    child = subprocess.Popen(argv)

    def forward(signum: int, _frame: FrameType | None) -> None:
        # a paused broker must still end on SIGTERM (the pod's deletion): wake it too
        for sig in (signum, signal.SIGCONT):
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, sig)

    for sig in FORWARDED:
        signal.signal(sig, forward)
    while True:
        try:
            pid, status = os.wait()  # the child, or an orphan re-parented to pid 1
        except ChildProcessError:
            return 0
        except InterruptedError:
            continue
        if pid == child.pid:
            return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else \
                128 + os.WTERMSIG(status)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--check"]:
        return run([sys.executable, "-c", "pass"])
    if not args:
        print("usage: python -m weeble.orchestrator.backends.podinit PROGRAM ARG...",
              file=sys.stderr)
        return 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
