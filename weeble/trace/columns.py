"""The column encoders of the live trace's batch entries (`weeble.trace.writer.LiveSink`),
compiled with mypyc with the core (`scripts/compile.py`): the hottest code of a traced broker.

A batch entry (the records of one request, one write to a client, one link batch) is encoded as
one bytes, its records joined by newlines. When every value is what the wire gives, the whole
entry is one bytes formatting of a template repeated once per record, filled from columns
(each notification's publisher, seq, timestamp, attributes, ...), each column's JSON from one
orjson call: no formatting step per record. Each encoder here returns None when a value is of
another type than the wire gives, or one orjson refuses: the writer then encodes the entry
record by record, and the bytes are the same either way (`tests/trace/test_trace.py` holds them
to `encode(make_record(...))` on odd values).

A notification's `publish` and `deliver` records share the JSON of its ids and publication
time (`"p#1","publisher":"p","seq":1,"published_at":1.5`): `publish_fast` keeps it on the
notification (`Notification.trace_ids`) and `deliver_fast` reuses it, so a notification
published and delivered by one broker has those values encoded once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import repeat
from typing import Any, cast

import orjson

from weeble.core.messages import Notification

OPTIONS = orjson.OPT_NON_STR_KEYS


def jsonable(value: Any) -> Any:
    """Values JSON has no form for: sets sorted (set order depends on hash randomization),
    anything else (a Filter, an enum) by its text."""
    if isinstance(value, set | frozenset):
        return sorted(str(v) for v in value)
    return str(value)


def literal(part: bytes) -> bytes:
    """`part` as literal text of a bytes-formatting template."""
    return part.replace(b"%", b"%%")


def fill(template: bytes, k: int, *cols: Iterable[Any]) -> bytes:
    """`k` records joined by newlines: `template` (one record, a conversion per column) filled
    with each row of `cols` (`k` values each), in one formatting for the whole entry."""
    width = len(cols)
    values: list[Any] = [None] * (k * width)
    for i, column in enumerate(cols):  # interleaved by slices: no step per value
        values[i::width] = column
    return b"\n".join(repeat(template, k)) % tuple(values)


def ints(values: list[int]) -> list[bytes]:
    """Each int's JSON, from one orjson call (bytes fill a template faster than ints)."""
    return orjson.dumps(values)[1:-1].split(b",")


def columns(values: list[Any], sep: bytes, strip: int) -> list[bytes] | None:
    """Each value's JSON as orjson writes it inside a record, from one orjson call for the
    whole column: orjson writes a list as its items' JSON joined by commas, so the items are
    the pieces between the separators (`sep`: "," for scalars, "},{" for dicts, whose outer
    braces `strip` takes off). None when some piece holds a separator itself (the count tells)
    or the column does not encode: the caller then encodes record by record."""
    try:
        joined = orjson.dumps(values, default=jsonable, option=OPTIONS)
    except (TypeError, orjson.JSONEncodeError):
        return None
    pieces = joined[1 + strip : len(joined) - 1 - strip].split(sep)
    return pieces if len(pieces) == len(values) else None


def all_ints(values: list[Any]) -> bool:
    """Every value an int (what the wire gives; one beyond 64 bits makes `ints` raise, and
    the entry is encoded record by record)."""
    return set(map(type, values)) == {int}


def fast(encoder: Callable[..., bytes | None], *args: Any) -> bytes | None:
    """`encoder(*args)`, or None when a value does not encode (a str orjson refuses: the
    record-by-record encoders take it to the general one)."""
    try:
        return encoder(*args)
    except (TypeError, orjson.JSONEncodeError):
        return None


def ids(notifications: list[Notification]) -> tuple[bytes, list[list[bytes]]] | None:
    """The template of the notifications' ids in a record, from the opening quote of `nid` to
    the value of `seq`, and the columns its conversions take, when every publisher is a str
    and every seq an int orjson encodes (what the wire gives); None otherwise. `nid` is
    `publisher#seq`: its JSON is the publisher's with `#seq` inside the quotes (neither `#`
    nor a digit is escaped). One publisher (a request from one client) is in the template."""
    seqs: list[Any] = [n.seq for n in notifications]
    if not seqs or not all_ints(seqs):
        return None
    publishers: list[Any] = [n.publisher for n in notifications]
    distinct = set(publishers)
    if set(map(type, distinct)) != {str}:
        return None
    texts = ints(seqs)
    if len(distinct) == 1:
        q = literal(orjson.dumps(publishers[0]))
        return q[:-1] + b'#%s","publisher":' + q + b',"seq":%s', [texts, texts]
    quoted = {p: orjson.dumps(p) for p in distinct}
    opened = {p: q[:-1] for p, q in quoted.items()}
    return b'%s#%s","publisher":%s,"seq":%s', [
        [opened[p] for p in publishers],
        texts,
        [quoted[p] for p in publishers],
        texts,
    ]


def shared_ids(notifications: list[Notification]) -> list[bytes] | None:
    """Each notification's ids and publication time as its `publish` and `deliver` records
    both hold them, from the opening quote of `nid` to the value of `published_at`, each kept
    on its notification (`trace_ids`) for its `deliver` records; None when a value is not
    what the wire gives."""
    found = ids(notifications)
    if found is None:
        return None
    stamps = columns([n.published_at for n in notifications], b",", 0)
    if stamps is None:
        return None
    template, ids_columns = found
    k = len(notifications)
    # JSON holds no raw newline: one piece per notification
    pieces = fill(template + b',"published_at":%s', k, *ids_columns, stamps).split(b"\n")
    if len(pieces) != k:
        return None
    for i in range(k):  # compiled: a loop in C
        notifications[i].trace_ids = pieces[i]
    return pieces


def publish_fast(head: bytes, notifications: list[Notification]) -> bytes | None:
    """`publish` records of a request whose values are all what the wire gives, in one
    formatting (see `fill`); None otherwise. Each notification keeps its ids' JSON for its
    `deliver` records (see `shared_ids`)."""
    attributes: list[Any] = [n.attributes for n in notifications]
    if set(map(type, attributes)) != {dict}:
        return None
    maps = columns(attributes, b"},{", 1)
    if maps is None:
        return None
    pieces = shared_ids(notifications)
    if pieces is None:
        return None
    return fill(literal(head) + b'%s,"attributes":{%s}}', len(notifications), pieces, maps)


def deliver_fast(head: bytes, deliveries: list[tuple[str | None, Notification]]) -> bytes | None:
    """`deliver` records of a write whose values are all what the wire gives, in one
    formatting (see `fill`), from the ids' JSON its `publish` record left on each
    notification (`shared_ids`; encoded now for those that have none); None otherwise."""
    subs: list[Any] = [s for s, _ in deliveries]
    distinct = set(subs)
    if not set(map(type, distinct)) <= {str, type(None)}:
        return None
    notifications = [n for _, n in deliveries]
    kept = cast(list[bytes], [n.trace_ids for n in notifications])  # None: not kept
    if len(distinct) == 1:  # one subscription, as a stream has unless a table is wrong
        lead = head + orjson.dumps(subs[0]) + b',"nid":'
        glue = b"}\n" + lead
        try:
            body = glue.join(kept)  # a None (no `publish` record here) raises
        except TypeError:
            pieces = shared_ids(notifications)
            if pieces is None:
                return None
            body = glue.join(pieces)
        return lead + body + b"}"
    if None in kept:  # encoded now (see above)
        pieces = shared_ids(notifications)
        if pieces is None:
            return None
        kept = pieces
    quoted = {s: orjson.dumps(s) for s in distinct}
    return fill(literal(head) + b'%s,"nid":%s}', len(subs), [quoted[s] for s in subs], kept)


def receive_fast(
    head: bytes, tail: bytes, lseqs: list[int], notifications: list[Notification]
) -> bytes | None:
    """`receive` records whose values are all what the wire gives, in one formatting (see
    `fill`); None otherwise."""
    found = ids(notifications)
    if found is None or not all_ints(lseqs):
        return None
    template, ids_columns = found
    return fill(
        literal(head) + template + b',"lseq":%s' + literal(tail),
        len(notifications),
        *ids_columns,
        ints(lseqs),
    )


def send_fast(
    head: bytes,
    tail: bytes,
    notifications: list[Notification],
    lseqs: list[int],
    sizes: list[int],
    fates: list[str],
) -> bytes | None:
    """`send` records whose values are all what the wire gives, in one formatting (see
    `fill`); None otherwise."""
    found = ids(notifications)
    if found is None or not all_ints(lseqs) or not all_ints(sizes):
        return None
    distinct: set[Any] = set(fates)
    if set(map(type, distinct)) != {str}:
        return None
    ids_template, ids_columns = found
    template = literal(head) + ids_template + b',"lseq":%s,"bytes":%s' + literal(tail)
    numbers = (ints(lseqs), ints(sizes))
    k = len(notifications)
    if len(distinct) == 1:  # all queued, as an uncut link without faults has them
        return fill(template + literal(orjson.dumps(fates[0])) + b"}", k, *ids_columns, *numbers)
    quoted = {f: orjson.dumps(f) for f in distinct}
    return fill(template + b"%s}", k, *ids_columns, *numbers, [quoted[f] for f in fates])
