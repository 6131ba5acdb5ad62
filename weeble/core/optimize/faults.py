"""Layer optimize's fault targets (ch. 5): the interest cache (optimize.cache.*), the
environment of summaries, interests and learned link costs (optimize.env.*, optimize.link) and
the measured link costs (optimize.measured)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from weeble.core.corruption import CorruptionError, Faults, number
from weeble.core.events import Corrupt, Effect

if TYPE_CHECKING:
    from weeble.core.optimize.layer import Optimize

FAULTS: Faults[Optimize] = Faults("optimize")


def _view_optimize(opt: Optimize, fault: Corrupt) -> Any:
    return opt.snapshot()


def _cost_value(value: object, field: str) -> float:
    cost = number(value, field)
    if cost < 0 or cost != cost:
        raise CorruptionError(f"{field}: value must be a cost >= 0, got {value!r}")
    return cost


@FAULTS.target("optimize.cache.clear", _view_optimize)
def _cache_clear(opt: Optimize, now: float, fault: Corrupt) -> list[Effect]:
    """Forget what this broker consumed: its next summary says it wants nothing."""
    old = opt.ram.cache
    opt.ram.cache = type(old)(size=old.size, m=old.m, k=old.k)
    opt.reset_joint()
    return []


@FAULTS.target("optimize.cache.insert", _view_optimize)
def _cache_insert(opt: Optimize, now: float, fault: Corrupt) -> list[Effect]:
    """Notification ids this broker never consumed enter its cache (an interest it lacks)."""
    ids = fault.value
    if isinstance(ids, str) or not isinstance(ids, list | tuple) or not ids \
            or not all(isinstance(i, str) for i in ids):
        raise CorruptionError("optimize.cache.insert: value must be a list of notification"
                              f" ids, got {ids!r}")
    for nid in ids:
        opt.ram.cache.record(nid)
    opt.reset_joint()
    return []


@FAULTS.target("optimize.env.clear", _view_optimize)
def _env_clear(opt: Optimize, now: float, fault: Corrupt) -> list[Effect]:
    """Forget the environment: every summary, processing cost and learned link cost."""
    opt.ram.env.clear()
    opt.ram.links.clear()
    opt.reset_joint()
    return []


@FAULTS.target("optimize.env.interest", _view_optimize)
def _env_interest(opt: Optimize, now: float, fault: Corrupt) -> list[Effect]:
    """Set I_{me,X} (args.broker = X, a broker of the environment) to `value`."""
    x = fault.args.get("broker")
    known = opt.ram.env.get(x)
    if known is None:
        raise CorruptionError(f"optimize.env.interest: args.broker {x!r} is not in this broker's"
                              f" environment (it knows: {', '.join(sorted(opt.ram.env))})")
    value = fault.value
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CorruptionError(f"optimize.env.interest: value must be a count >= 0, got {value!r}")
    known.interest = value
    return []


@FAULTS.target("optimize.link", _view_optimize)
def _learned_link(opt: Optimize, now: float, fault: Corrupt) -> list[Effect]:
    """Set the cost of the remote link args.a-args.b as this broker learned it (a broadcast's
    path) to `value`, as if learned now."""
    a, b = fault.args.get("a"), fault.args.get("b")
    if not isinstance(a, str) or not isinstance(b, str) or a == b:
        raise CorruptionError("optimize.link: args.a and args.b must be two broker ids,"
                              f" got {a!r}, {b!r}")
    opt.ram.links[(a, b) if a < b else (b, a)] = (_cost_value(fault.value, "optimize.link"),
                                                   now)
    opt.reset_joint()
    return []


@FAULTS.target("optimize.measured", _view_optimize)
def _measured(opt: Optimize, now: float, fault: Corrupt) -> list[Effect]:
    """Set the measured cost of the link to args.peer to `value` (null: forget the
    measurement, back to the scenario's cost) until the next measurement."""
    peer = fault.args.get("peer")
    if not isinstance(peer, str) or peer == opt.me:
        raise CorruptionError(f"optimize.measured: args.peer must be another broker's id,"
                              f" got {peer!r}")
    if fault.value is None:
        opt.ram.measured.pop(peer, None)
    else:
        opt.ram.measured[peer] = _cost_value(fault.value, "optimize.measured")
    return []
