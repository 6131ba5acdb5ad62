"""The verdict vocabulary: the statuses of a run and of its parts, and the exit code of each.

This module is the one place that names them. `weeble check`, `weeble analyze`, `weeble run`,
the simulator's summary, the reports and the JUnit output use these names and codes, and
docs/trace-schema.md ("Verdict statuses and exit codes") is generated from `STATUSES`, so a
suite can gate on a status by its exit code without reading weeble's code. The names are
stable: new statuses may be added, existing ones are never renamed or renumbered.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class Status(StrEnum):
    """The status of a run or of a part of it (the fault-free prefix, an episode, a failed
    reconfiguration). The value is what the trace's checkers write (`verdict.status`)."""

    PASS = "pass"
    FAIL = "fail"
    ASSUMPTIONS_VIOLATED = "assumptions violated"
    NOT_JUDGED = "not judged"
    NO_CHECKS_OBSERVED = "no checks observed"


# The exit code of a command whose input could not be judged at all: no such run, a trace of
# another schema version, a bad argument (every weeble command).
BAD_INPUT = 2


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusInfo:
    status: Status
    exit_code: int
    rank: int  # the run's status is the part status of highest rank
    meaning: str


STATUSES: tuple[StatusInfo, ...] = (
    StatusInfo(status=Status.PASS, exit_code=0, rank=0, meaning=(
        "every part was judged and met its rules: no missing, spurious or duplicate delivery "
        "and no FIFO violation before the first fault, every episode stabilized within Δ at "
        "the service level and at the state level, no reconfiguration failed")),
    StatusInfo(status=Status.FAIL, exit_code=1, rank=4, meaning=(
        "a part broke a rule while the timing model held (or broke one no delay explains: a "
        "duplicate, a reordering, a failed reconfiguration, an episode late even at the timing "
        "it had): the algorithm or its implementation is wrong")),
    StatusInfo(status=Status.ASSUMPTIONS_VIOLATED, exit_code=3, rank=3, meaning=(
        "a part broke a rule while the run broke the timing model the bounds assume (R13): "
        "the figures say how far; the algorithm is not shown wrong, and the run does not pass")),
    StatusInfo(status=Status.NOT_JUDGED, exit_code=4, rank=2, meaning=(
        "a part could not be judged: a fault never ended (R10), or an episode had no judged "
        "publication after its end (R11: \"no publications observed\"); it is reported on "
        "its own row and the other parts are judged as usual")),
    StatusInfo(status=Status.NO_CHECKS_OBSERVED, exit_code=5, rank=1, meaning=(
        "every judged part passed, but an episode had no state-level check (R12: no "
        "`legitimacy` record and no complete snapshot round between its end and the next "
        "episode): its state-level stabilization was not measured, which is not a pass")),
)

_BY_STATUS = {s.status: s for s in STATUSES}


def info(status: str) -> StatusInfo:
    """The entry of a status given by its name (ValueError for an unknown name)."""
    return _BY_STATUS[Status(status)]


def exit_code(status: str) -> int:
    """The exit code of `weeble check`, `weeble analyze` and `weeble run` for a run's status."""
    return info(status).exit_code


def worst(statuses: Iterable[str]) -> Status:
    """The run's status from its parts' statuses (pass when there are none)."""
    return max((info(s) for s in statuses), key=lambda s: s.rank,
               default=_BY_STATUS[Status.PASS]).status


def document() -> str:
    """The contract's table of statuses (docs/trace-schema.md)."""
    rows = [f"| `{s.status.value}` | {s.exit_code} | {s.meaning} |" for s in STATUSES]
    return "\n".join([
        "| status | exit code | meaning |", "|---|---|---|", *rows,
        f"| (bad input) | {BAD_INPUT} | the run could not be read: no such directory, a trace "
        "of another schema version, a bad argument |",
    ])
