"""`notification_parser`: one reused message for a hot path's notifications. What it decodes
is what `FromString` decodes, notification by notification, across the message's renewals,
and a notification decoded earlier keeps its values after later parses."""

from __future__ import annotations

import pytest

from weeble.codec.wire import (
    PARSER_RENEW_BYTES,
    WireError,
    decode_notification,
    decode_publication,
    encode_notification,
    notification_parser,
)
from weeble.core.messages import Notification


def _notifications(count: int) -> list[Notification]:
    # attribute sets that differ in keys, types and sizes, so a parse that kept anything of
    # the one before (a key, a value of another type, a longer string) would show
    out = []
    for i in range(count):
        attrs: dict[str, object] = {"class": i % 7, "n": i}
        if i % 3 == 0:
            attrs["name"] = "x" * (i % 50)
        if i % 5 == 0:
            attrs["ratio"] = i / 3
        if i % 11 == 0:
            attrs["flag"] = bool(i % 2)
        out.append(Notification(f"p{i % 4}", i + 1, attrs, 1000.0 + i))
    return out


def test_the_parser_decodes_what_from_string_decodes_across_renewals() -> None:
    notifications = _notifications(3000)
    encoded = [encode_notification(n) for n in notifications]
    assert sum(map(len, encoded)) > 2 * PARSER_RENEW_BYTES  # the message is renewed
    parse = notification_parser()
    decoded = [decode_notification(data, parse=parse) for data in encoded]
    assert decoded == [decode_notification(data) for data in encoded]
    assert decoded == notifications  # and kept their values through the later parses


def test_a_publication_through_the_parser_fills_defaults_and_names_bad_input() -> None:
    parse = notification_parser()
    n = Notification("", 4, {"a": 1}, 0.0)
    got, wire = decode_publication(encode_notification(n), "notifications[0]", "c1", 7.5,
                                   parse)
    assert (got.publisher, got.seq, got.attributes, got.published_at) == ("c1", 4, {"a": 1},
                                                                          7.5)
    assert decode_notification(wire, parse=parse) == got
    with pytest.raises(WireError, match=r"notifications\[1\]: undecodable"):
        decode_publication(b"\xff\xff\xff", "notifications[1]", "c1", 7.5, parse)
    # a failed parse leaves nothing behind for the next one
    after = Notification("p", 5, {"b": "s"}, 2.0)
    assert decode_notification(encode_notification(after), parse=parse) == after
