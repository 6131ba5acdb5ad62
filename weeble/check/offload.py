"""The online checker in a second process: the simulator's process simulates, the other core
judges (issue 15, the speed floor).

`CheckerProcess` starts `python -c 'weeble.check.offload.serve()'` (this checkout's weeble
first on its path, so compiled or pure, it runs the build the simulator runs) and feeds it the
batches of a `weeble.check.deliveries.Recorder` through a pipe: each batch one frame (its
deliveries as the bytes of an array of ints, 32 bytes each). The child replays them into its
own `Deliveries` with `Replay`, as the in-process path does, and at `finish` sends back the
checker's `outcome`. There is one checker: both sides judge with the same `Deliveries` and the
same `Replay`.

Bounded: the pipe holds a frame or two; a child that falls behind slows the sender down, never
its memory. A child that fails reports its traceback and exits; one that dies without a word is
noticed by the broken pipe or the end of its output: either way the simulator raises
`CheckerFailed` naming what happened, rather than wait.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import struct
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import IO, Any

import weeble
from weeble.check.deliveries import Columns, Replay, of_settings, pack, unpack

HEADER = struct.Struct("<Q")  # the length of the frame that follows
PIPE_SIZE = 1 << 20  # bytes: room for a frame while the child works on the one before

# frames, pickled: (SETTINGS, Deliveries.settings()), (RECORDS, packed Columns), (FINISH, end);
# the answers: (OUTCOME, Deliveries.outcome()) or (ERROR, traceback text)
SETTINGS, RECORDS, FINISH, OUTCOME, ERROR = "settings", "records", "finish", "outcome", "error"


class CheckerFailed(RuntimeError):
    """The checker process failed or died: the run has no verdict."""


class CheckerProcess:
    def __init__(self, settings: dict[str, Any]) -> None:
        root = Path(weeble.__file__).resolve().parent.parent
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
        # a file, not a pipe: a chatty child never blocks on it
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by `close`)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from weeble.check.offload import serve; serve()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in: IO[bytes] = self.proc.stdin
        self._out: IO[bytes] = self.proc.stdout
        _widen(self._in)
        self.frames = 0
        self.peak_rss_mb = 0.0  # the child's, reported with its outcome
        self._send((SETTINGS, settings))

    def ship(self, columns: Columns) -> None:
        self._send((RECORDS, pack(columns)))

    def finish(self, columns: Columns, end: float) -> dict[str, Any]:
        """Send the last batch, close the run at `end`; the checker's outcome."""
        self.ship(columns)
        self._send((FINISH, end))
        try:
            answer = _read(self._out)
        except EOFError:
            raise self._failed("ended its output without an outcome") from None
        finally:
            self.close()
        if answer[0] == ERROR:
            raise CheckerFailed(f"the checker process failed:\n{answer[1]}")
        outcome: dict[str, Any] = answer[1]
        self.peak_rss_mb = outcome.pop("peak_rss_mb")
        return outcome

    def close(self) -> None:
        """Stop the child (it exits on the end of its input) and wait for it."""
        for f in (self._in, self._out):
            with contextlib.suppress(OSError):
                f.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()

    def _send(self, frame: tuple[str, Any]) -> None:
        data = pickle.dumps(frame, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self._in.write(HEADER.pack(len(data)))
            self._in.write(data)
            self._in.flush()
        except (BrokenPipeError, ValueError):  # ValueError: closed after an earlier failure
            raise self._failed(f"stopped reading (frame {self.frames + 1})") from None
        self.frames += 1

    def _failed(self, what: str) -> CheckerFailed:
        """The error of a child that stopped: its own report if it made one, else how it
        ended and the end of its stderr."""
        try:
            answer = _read(self._out)
        except (EOFError, OSError, ValueError, pickle.UnpicklingError):
            answer = None
        if answer is not None and answer[0] == ERROR:
            self._reap()
            return CheckerFailed(f"the checker process failed:\n{answer[1]}")
        code = self._reap()
        how = (f"was killed by signal {-code}" if code is not None and code < 0
               else f"exited with code {code}")
        self._stderr.seek(0)
        tail = self._stderr.read()[-2000:].decode(errors="replace")
        return CheckerFailed(f"the checker process (pid {self.proc.pid}) {what}: it {how}"
                             + (f"; its stderr ends:\n{tail}" if tail else ""))

    def _reap(self) -> int | None:
        with contextlib.suppress(OSError):
            self._in.close()
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def _widen(pipe: IO[bytes]) -> None:
    """A pipe of PIPE_SIZE where Linux allows it (the default 64 KiB holds a tenth of a frame)."""
    try:
        import fcntl

        fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, PIPE_SIZE)  # type: ignore[attr-defined]
    except (ImportError, AttributeError, OSError):
        pass


def _read(f: IO[bytes]) -> tuple[str, Any]:
    head = f.read(HEADER.size)
    if len(head) < HEADER.size:
        raise EOFError
    (n,) = HEADER.unpack(head)
    data = f.read(n)
    if len(data) < n:
        raise EOFError
    return pickle.loads(data)  # type: ignore[no-any-return]


def _write(f: IO[bytes], frame: tuple[str, Any]) -> None:
    data = pickle.dumps(frame, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(HEADER.pack(len(data)))
    f.write(data)
    f.flush()


def _peak_rss_mb() -> float:
    """This process's own peak RSS (VmHWM: getrusage's maxrss would count the simulator's pages
    shared with the fork this process was exec'd from)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def serve() -> None:
    """The child: judge the frames of stdin; answer on stdout. Exits on the end of its input
    (the simulator stopped) and after answering `finish` or reporting an error."""
    gc.disable()  # as in the simulator's run (run._no_collections): the checker makes no cycles
    out = os.fdopen(os.dup(1), "wb")
    sys.stdout = sys.stderr  # a stray print must not corrupt the answers
    source = sys.stdin.buffer
    try:
        kind, settings = _read(source)
        if kind != SETTINGS:
            raise ValueError(f"the first frame is {kind!r}, not {SETTINGS!r}")
        d = of_settings(settings)
        replay = Replay(d)
        while True:
            try:
                kind, body = _read(source)
            except EOFError:
                return  # the simulator went away: nobody waits for a verdict
            if kind == RECORDS:
                replay(unpack(body))
            elif kind == FINISH:
                d.finish(body)
                _write(out, (OUTCOME, {**d.outcome(), "peak_rss_mb": _peak_rss_mb()}))
                return
            else:
                raise ValueError(f"not a frame of the checker's protocol: {kind!r}")
    except BaseException:
        try:
            _write(out, (ERROR, traceback.format_exc()))
        finally:
            sys.exit(1)
