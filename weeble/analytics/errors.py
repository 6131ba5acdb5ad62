"""Errors a user can fix (a missing run, a trace we cannot read, no Java): no traceback."""

from __future__ import annotations

from weeble.trace.reader import TraceError


class AnalyticsError(Exception):
    pass


USER_ERRORS: tuple[type[Exception], ...] = (AnalyticsError, TraceError)
