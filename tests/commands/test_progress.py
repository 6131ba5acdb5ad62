"""Long work's progress in a log: plain lines at each twentieth, with the time elapsed and left."""

from __future__ import annotations

import io

from weeble.progress import Progress, duration_text


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_log_gets_a_line_at_each_twentieth_and_at_the_end() -> None:
    log, clock = io.StringIO(), Clock()
    with Progress("reproduce ch5", unit="evaluations", stream=log, clock=clock) as bar:
        assert not bar.terminal
        for done in range(1, 101):
            clock.now += 10
            bar.update(done, total=100, detail=f"last: point {done}")
    lines = log.getvalue().splitlines()
    assert len(lines) == 21  # 1 (the first twentieth begun), then 5, 10, ..., 100
    assert lines[1] == ("reproduce ch5: 5/100 evaluations, 50s, about 15m50s left; "
                        "last: point 5")
    assert lines[-1] == "reproduce ch5: 100/100 evaluations, 16m40s; last: point 100"


def test_reused_work_is_left_out_of_the_time_left() -> None:
    log, clock = io.StringIO(), Clock()
    bar = Progress("reproduce ch5", unit="evaluations", total=100, stream=log, clock=clock)
    with bar:
        bar.update(50, skipped=True)  # from an earlier run's points, at once
        clock.now += 100
        bar.update(60)  # 10 evaluated in 100 s: 40 more take 400 s, not 67
    assert bar.line().endswith("60/100 evaluations, 1m40s, about 6m40s left")
    assert log.getvalue().splitlines()[-1] == bar.line()


def test_work_of_seconds_gets_one_line() -> None:
    log, clock = io.StringIO(), Clock()
    with Progress("simulating x", unit="simulated s", total=60, stream=log, clock=clock) as bar:
        for i in range(1, 201):
            clock.now += 0.01
            bar.update(60 * i / 200)
    assert log.getvalue() == "simulating x: 60/60 simulated s, 2s\n"


def test_quiet_prints_nothing() -> None:
    log = io.StringIO()
    with Progress("simulating x", unit="simulated s", total=10, quiet=True, stream=log) as bar:
        for i in range(11):
            bar.update(i)
        bar.print("a message")
    assert log.getvalue() == ""


def test_durations_read_short() -> None:
    assert [duration_text(s) for s in (0.2, 7, 59.6, 723, 3600, 3900)] == [
        "0s", "7s", "1m00s", "12m03s", "1h00m", "1h05m"]


def test_a_phase_gets_its_own_line_and_clock_and_a_long_wait_a_line_a_minute() -> None:
    log, clock = io.StringIO(), Clock()
    with Progress("starting 121 brokers", unit="s", total=60, stream=log, clock=clock) as bar:
        bar.describe(bar.what)
        clock.now += 30
        bar.describe("warm start r1")
        for n in range(1, 181):  # 3 minutes, the run not begun: a line a minute
            clock.now += 1
            bar.update(0, detail=f"{n * 50} subscribed before t = 0")
        bar.describe("run r1")
        for second in range(1, 61):
            clock.now += 1
            bar.update(second, detail="pubs 10")
        bar.describe("stopping", "draining, collecting traces")
    lines = log.getvalue().splitlines()
    assert lines[:5] == [
        "starting 121 brokers", "warm start r1",
        "warm start r1: 0/60 s, 1m00s; 3000 subscribed before t = 0",
        "warm start r1: 0/60 s, 2m00s; 6000 subscribed before t = 0",
        "warm start r1: 0/60 s, 3m00s; 9000 subscribed before t = 0"]
    assert lines[5] == "run r1"
    run = lines[6:-1]  # the run's clock starts at its own line: every 5 s (GAP) to its end
    assert run[0] == "run r1: 5/60 s, 5s, about 55s left; pubs 10"
    assert run[-1] == "run r1: 60/60 s, 1m00s; pubs 10" and len(run) == 12
    assert lines[-1] == "stopping: draining, collecting traces"


def test_the_time_left_follows_the_recent_pace() -> None:
    """A grid's closed forms come at once and its simulations after them: the estimate must
    not take the quick start for the pace of what is left."""
    log, clock = io.StringIO(), Clock()
    bar = Progress("reproduce sketches", unit="evaluations", total=200, stream=log, clock=clock)
    with bar:
        for done in range(1, 101):  # 100 model evaluations in 1 s
            clock.now += 0.01
            bar.update(done)
        for done in range(101, 121):  # then simulations of 10 s each
            clock.now += 10
            bar.update(done)
    # 80 left at the last 40 s's 10 s each (the whole run's average would say 2m14s)
    assert bar.line().endswith("120/200 evaluations, 3m21s, about 13m20s left")
