"""Write docs/trace-schema.md from the code: the schema, the header, filters, the rules.

    python -m weeble.check.doc            # rewrite docs/trace-schema.md
    python -m weeble.check.doc --check    # exit 1 if it is stale (a test does the same)

The document is everything a checker of weeble runs needs: it is generated from
`weeble.trace.schema` (kinds, fields, types), `weeble.trace.header` (the header and the
windows), the filter semantics of `weeble.core.filters`, the legitimacy rule of
`weeble.core.routing.legitimacy` and the rules R1-R15 of `weeble.check.rules`.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path
from types import ModuleType

from weeble.check import status
from weeble.check.rules import RULES, TIMING_TOLERANCE
from weeble.core import filters, rom
from weeble.core.routing import legitimacy
from weeble.trace import schema, summary
from weeble.trace.header import RUN_FIELDS
from weeble.trace.writer import CLIP_CHARS, LiveSink

DOC = Path(__file__).resolve().parents[2] / "docs" / "trace-schema.md"


def _docstring(module: ModuleType) -> str | None:
    """A module's docstring, also when it is compiled (scripts/compile.py: mypyc keeps no
    module docstring), read from its source then."""
    if module.__doc__ is not None or module.__file__ is None:
        return module.__doc__
    source = Path(module.__file__).parent / (module.__name__.rsplit(".", 1)[-1] + ".py")
    return ast.get_docstring(ast.parse(source.read_text(encoding="utf-8")), clean=False)


def _section(docstring: str | None, title: str) -> str:
    """The part of a module docstring under a reST-style title (up to the next title)."""
    lines = (docstring or "").splitlines()
    out: list[str] = []
    inside = False
    for i, line in enumerate(lines):
        underline = i + 1 < len(lines) and set(lines[i + 1].strip()) == {"-"}
        if underline:
            if inside:
                break
            inside = line.strip() == title
            continue
        if inside and set(line.strip()) != {"-"}:
            out.append(line)
    return "\n".join(out).strip()


def _paragraph_after(docstring: str | None, start: str) -> str:
    """From the line starting with `start` to the end of its paragraph (list) block."""
    text = docstring or ""
    i = text.find(start)
    if i < 0:
        raise AssertionError(f"{start!r} not found")
    end = text.find("\n\n", i)
    return text[i:end if end >= 0 else None].strip()


def _grammar(text: str) -> list[str]:
    """A reST literal block (`::` then indented lines) as a fenced block, then the prose."""
    code, prose = [], []
    for line in text.splitlines():
        if line.strip() == "::":
            continue
        if line.startswith("    ") and not prose:
            code.append(line[4:])
        elif line.strip() or prose:
            prose.append(line)
    return ["```", *code, "```", "", *prose]


# R8(b) in mode skip_ring: what `weeble.core.overlay.skipring.legitimacy.snapshot_problems`
# judges, said so that a checker can do it from the snapshots alone.
SKIP_RING_STATE = """\
**State legitimacy in mode skip_ring** (R9 of a round, R8b). A snapshot's `skip_ring` is
`{"members": {topic: M}, "supervised": {topic: {"db": {"<i>": broker}, "dead": [...],
"corrupted": bool}}, "local": [[client, sub_id, topic], ...]}`, one M per topic the broker is an
active member of: `{"label": i, "leaving": bool, "left": R, "right": R, "ring": R,
"shortcuts": {"<j>": broker}, "pubs": count, "digest": str or null}`, R a `[broker, label]` or
null. A label is an index i ≥ 0 naming the bit string r(i): i in binary without leading zeros,
its leading bit moved to the end (r(0) = 0, r(1) = 1, r(2) = 01, r(3) = 11, r(4) = 001, r(6) =
101); its *length* is max(1, the bit length of i), its *value* the binary fraction 0.r(i)
(r(4) = 1/8, r(6) = 5/8). SR(n), over the labels 0 … n−1: for each k = 1 … ⌈log₂ n⌉, the labels
of length ≤ k in the order of their values form a cycle (each with the next, the last with the
first); the edges of SR(n) are those of all these cycles. The *ring order* is the n labels by
value; a label's predecessor p and successor s are its neighbours in that order, cyclically.
A subscription's topic is the name in its filter `topic == "<name>"` (another filter has no
topic and counts nowhere). Per topic that some subscription, `supervised` or `members` names,
with *need* the brokers of its required subscriptions and *may* those of its allowed ones (R9's
windows, with this mode's A and L), the round has a problem if:
(1) no broker supervises the topic (none has it in `supervised`) while need is not empty;
otherwise, the supervisor is the smallest broker id that has it, and its record decides:
(2) `corrupted` is true (then nothing else of the topic is judged); (3) its `db`'s brokers, the
*members*, do not satisfy need ⊆ members ⊆ may (then nothing else is judged); (4) a broker has
the topic in `members`, not `leaving`, and is neither a member nor in may (a joining broker is
active one hop before the `db` has it); and, only when may = need (no broker of the topic is
inside a join's A or a leave's L window: the paper promises the ring's closure only while no
subscriber joins or leaves, and each join or leave leaves SR(n) unmet for a few member
intervals), for each entry i → v of a non-empty `db` (its labels are exactly 0 … n−1 when it
is not corrupted): (5) v has no `members` entry for the topic, or (6) v's `label`, `left`,
`right`, `ring` and `shortcuts` are not: label i; left [db[p], p], or null if i is the first
in ring order; right [db[s], s], or null if i is the last; ring [db[p], p] if i is the first,
[db[s], s] if i is the last, else null; shortcuts, for every SR(n) neighbour j of i other
than p and s, "<j>" → db[j] (n = 1: left, right, ring null and no shortcuts). The members'
tries (`pubs`, `digest`) are not judged: the paper's publication convergence is for a fixed
publication set, and while clients publish a publication is always on its way (flooded, or
handed by the supervisor to r(0)), so two tries differ at an instant in a correct run, of equal
size too (each holds one the other has yet to get), which a count and a digest cannot tell from
a publication missing for good; a member that lacks one for good has local clients that miss
it, which R3 counts."""


def _fields(kind: schema.Kind) -> str:
    rows = []
    for name, typ in kind.fields.items():
        need = "required" if name in kind.required else "optional"
        rows.append(f"| `{name}` | {typ.value} | {need} | {schema.FIELD_DOC.get(name, '')} |")
    if not rows:
        return "_No fields beyond the four every record has._\n"
    return "| field | type | | meaning |\n|---|---|---|---|\n" + "\n".join(rows) + "\n"


def _bounds() -> str:
    """The formulas of Δ, rendered from the expressions weeble.core.rom evaluates for the
    header (`Formula`): the text cannot state another bound than the one the runs use."""
    rows = [f"| `{a.value}` | {f.text()} | {f.source} |" for a, f in rom.ROUTING_BOUNDS.items()]
    w, a, c = rom.WRAPPER_BOUND, rom.ADVERTS_BOUND, rom.COLOURS_BOUND
    e = rom.ANTI_ENTROPY_BOUND
    return "\n".join([
        "It is the value of these formulas (weeble.core.rom computes the header's `bound` "
        "from the same expressions this table is printed from):",
        "",
        "| routing (`algorithm`) | Δ | source |",
        "|---|---|---|",
        *rows,
        f"| any, under the periodic-rebuild wrapper (`wrapper: true`) | {w.text()} | "
        f"{w.source} |",
        "",
        f"With advertisements (`adverts: true`): Δ_a = {a.text()} {a.source}, Δ of the row "
        "above (the advertisement and the subscription layers stabilize one after the other). "
        "With the coloured overlay (the header has `recolor_period` ξ): the header's "
        f"`overlay_bound` is ∆r = {c.text()} ({c.source}; h is the bound on the tree's "
        f"height), and the run's Δ is {rom.COLOURED_RUN_BOUND.text()}. In mode "
        f"`anti_entropy`: Δ = {e.text()} ({e.source}), T = `anti_entropy.period`, K the rounds "
        "within which an edge finds a difference (`full_every` when it is > 0, 1 for "
        "`sketch: full`, else the rounds after which a single difference escapes every "
        "re-salted sketch with probability below 10⁻⁶); its windows A, D, L and the rules are "
        "those of mode `leasing`.",
    ])


def render() -> str:
    """The document, as text."""
    flush = LiveSink.__init__.__kwdefaults__["flush_interval"]  # type: ignore[index]
    parts = [
        f"# Weeble trace schema, version {schema.VERSION}",
        "",
        "<!-- Generated by `python -m weeble.check.doc` from weeble/trace and weeble/check; "
        "do not edit (a test fails when it is stale). -->",
        "",
        "This document is the contract between a weeble run and any checker of it. With it "
        "alone you can read a run's trace and decide, by the same rules weeble uses, whether "
        "every notification reached exactly the clients it should, whether the routing tables "
        "became legitimate again after each fault, how fast, and whether the run kept the "
        "timing model its bounds assume.",
        "",
        "## Files",
        "",
        f"A run directory `RUN/` holds `RUN/{schema.TRACE_DIR}/*.jsonl`: one file per node "
        "(broker, live client, `chaos`, `sim`), the same layout for simulated and live runs. "
        f"`RUN/{schema.TRACE_DIR}/{schema.RUN_FILE}` holds the run's header record (kind `run`) "
        "and, at the end, a `run_end` record. In the simulator, a client has no file of its "
        "own: its records are in its broker's file (their `node` still names who acted).",
        "",
        "Each line is one JSON object, a *record*. A field whose value is `null` is the same "
        "as an absent field. A live node is killed with SIGKILL at the worst moment: its file "
        f"then lacks at most its last {flush:g} s of records (the writer flushes every "
        f"{flush:g} s) and may end with a torn line (no final newline, not valid JSON): "
        "skip a torn *last* line; any other line that does not parse is an error. Records of "
        "one file are in time order.",
        "",
        f"Long values are truncated: a free-text value longer than {CLIP_CHARS} characters (an "
        "error text `why` or `detail`, a refresh's filter, the filter of a `sub`/`unsub` link "
        f"message in `send`, `receive` and `drop` records) is cut to its first {CLIP_CHARS} "
        "characters followed by `…`, and the record gains `<field>_sha256`: the SHA-256 (hex) "
        "of the whole value's UTF-8 bytes, to join it with the record that has it whole (a "
        "`subscribe` record keeps its filter whole; publications keep their attributes; both "
        "are bounded by the brokers' size limits). A live node's file is also capped in size: "
        "it then ends with a `trace_capped` record and lacks that node's later records.",
        "",
        "Every record has these fields:",
        "",
        "| field | type | meaning |",
        "|---|---|---|",
        *[f"| `{n}` | {t.value} | {schema.HEADER_DOC[n]} |" for n, t in schema.HEADER.items()],
        "",
        "Types: `str`, `int`, `float` (an int is a valid float), `bool`, `str_list` (a list of "
        "strings), `json` (any JSON value). A record of a kind listed below has its required "
        "fields; a reader may ignore records of kinds it does not know.",
        "",
        "## The run header",
        "",
        "The `run` record's fields, in order: " + ", ".join(f"`{f}`" for f in RUN_FIELDS) + ". "
        "`topology` is `{\"brokers\": [...], \"links\": [[a, b], ...], \"root\": r}` (a tree). "
        "`bound` is Δ, the worst-case stabilization time of the run, given so that a "
        "checker need not know the algorithms. " + _bounds(),
        "",
        "`mode` (absent: `leasing`) says how the brokers keep their state correct. In mode "
        "`skip_ring` (seed 003: topics on a supervised skip ring; subscriptions are "
        "`topic == \"<name>\"`, publications carry `topic`), `skip_ring` is `{\"interval\": "
        "T, \"supervisor_interval\": S}` and, with n brokers and L = ⌈log₂ n⌉: "
        f"Δ = {rom.SKIP_RING_BOUND.text()}; the path window d·δmax of the rules becomes "
        "P = (L + 2)·δmax + 2T (a flood over ≤ L ring hops after the supervisor's hand-off, "
        "or an anti-entropy repair) "
        "and holds for every pair of brokers; A = P + ρ + (L + 2)·T (the broker's join "
        "settles); D = P; a subscription is required in the state (R9) once A old and allowed "
        "2π + A after it ended. A delivery to a client whose subscription is younger than A "
        "at the publication (the topic's history, which a newcomer catches up on) is not held "
        "to the path rule R13(d), and per-publisher FIFO (R7) is counted but not judged: the "
        "mode does not promise it. State legitimacy (R8) is spec seed23 §A.12 per topic: a clean "
        "supervisor database holding the brokers with required subscriptions and none without "
        "an allowed one, and each member storing exactly its SR(n) label and edges (its trie "
        "is judged by the service level); precisely:",
        "",
        SKIP_RING_STATE,
        "",
        "## Record kinds",
        "",
        "| kind | written by | what it says |",
        "|---|---|---|",
        *[f"| `{k.name}` | {k.writers} | {k.doc} |" for k in schema.KIND_LIST],
        "",
    ]
    for k in schema.KIND_LIST:
        parts += [f"### `{k.name}`", "", k.doc[0].upper() + k.doc[1:] + ".", "", _fields(k)]
    parts += [
        "## Filters",
        "",
        "A subscription's `filter` is a conjunction of predicates over the notification's "
        "`attributes`.",
        "",
        _section(_docstring(filters), "Semantics"),
        "",
        "Text form:",
        "",
        *_grammar(_section(_docstring(filters), "Text form")),
        "",
        "## Correctness",
        "",
        RULES.strip(),
        "",
        "### Verdict statuses and exit codes",
        "",
        "A run's `verdict.status` (and each part's `status`) is one of these; `weeble check`, "
        "`weeble analyze` and `weeble run` exit with its code (`weeble run` also exits 1 when "
        "a fault it injected did not take effect). The names and codes are stable.",
        "",
        status.document(),
        "",
        "### The legitimate routing configuration (R9 in detail)",
        "",
        _paragraph_after(legitimacy.__doc__, "Per destination D of broker V"),
        "",
        f"(τ of R13 is {TIMING_TOLERANCE} s.)",
        "",
        "## summary.json",
        "",
        "`weeble simulate` also writes `RUN/summary.json`: the simulator's own judgement, "
        "made online by the same checker. Its fields (a test holds every summary the simulator "
        "writes to this table):",
        "",
        summary.document(),
        "",
    ]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
        if current != text:
            print(f"{DOC} is stale: run python -m weeble.check.doc", file=sys.stderr)
            return 1
        return 0
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote {DOC}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
