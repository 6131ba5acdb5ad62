"""Legitimacy as a pure function (DESIGN.md "Legitimacy is computable"): the check.

For a tree, the clients' live subscriptions and a configuration there is one legitimate state,
and a pure function computes it. Each layer declares its own rule beside it (`Rule`: a routing
predicate over the tables, an overlay predicate over the links and parent pointers), and the
broker composes the registry from its layers' declarations (`LEGITIMACY`, core/broker.py), as it
composes their fault targets. The types of the registry sit below the layers and the broker
(legitimacy_rules.py); this module checks with the broker's composition and knows no layer:

    routing/legitimacy.py            the routing tables of the static tree (ch. 3), and those
                                     of each colour of the 3-colour scheme (4.5)
    overlay/legitimacy.py            the static tree's links and parent pointers
    overlay/coloured_legitimacy.py   the coloured overlay's trees and colours (4.5)
    overlay/skipring/legitimacy.py   the supervised skip ring, per topic (seed 003)

Subscriptions come and go, and the liveness property lets a new one activate gradually, so a
routing check takes two sets:
- `required`: subscriptions active long enough that every entry for them must be present;
- `allowed`: subscriptions that may still have entries (required ones, plus ones just made or
  recently ended, whose entries are still propagating or expiring).
With no churn the two are equal and the configuration is exact.

The brokers of one check are all of one kind: the first rule, in the broker's order, that
judges the first broker (`Rule.judges`) judges them all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from weeble.core.broker import LEGITIMACY  # the broker composes its layers' rules
from weeble.core.legitimacy_rules import Adverts, Broker, LiveSub, SnapshotView

# what a check is given, importable from here with the check itself
__all__ = ["Adverts", "Broker", "LiveSub", "SnapshotView", "check", "overlay"]


def check(
    brokers: Mapping[str, Broker], required: Iterable[LiveSub], allowed: Iterable[LiveSub],
    adverts: Adverts | None = None,
) -> list[str]:
    """Problems that keep the routing tables of `brokers` from the legitimate configuration;
    [] means legitimate. `adverts`: the live advertisements (required, allowed), when
    advertisements are in use."""
    return LEGITIMACY.check(brokers, required, allowed, adverts)


def overlay(brokers: Mapping[str, Any], root: str) -> list[str]:
    """Problems that keep the overlay layer of `brokers` from legitimacy; [] means legitimate."""
    return LEGITIMACY.overlay(brokers, root)
