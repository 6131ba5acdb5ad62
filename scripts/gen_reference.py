"""Write the generated reference pages from the code: the command line from the argparse
definitions (weeble/cli.py, weeble/commands/) and the scenario schema from the pydantic models
(weeble/model/scenario.py and the experiment, fault and selector models it holds).

    python scripts/gen_reference.py           # rewrite docs/reference/cli.md and scenario.md
    python scripts/gen_reference.py --check   # exit 1 if either is stale (a test does the same)

The trace schema has its own generator (python -m weeble.check.doc); the pages say so. A field's
description is the comment beside it (or right above it) in the model's source, so a comment
edited there changes the page: run this script and commit both.
"""

from __future__ import annotations

import argparse
import enum
import functools
import inspect
import io
import sys
import tokenize
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

ROOT = Path(__file__).resolve().parent.parent
CLI_DOC = ROOT / "docs" / "reference" / "cli.md"
SCENARIO_DOC = ROOT / "docs" / "reference" / "scenario.md"
WIDTH = 100  # argparse's usage lines, independent of the terminal


# ---- the command line -------------------------------------------------------------------------


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.HelpFormatter(prog, width=WIDTH)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _argument_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.option_strings:
            name = ", ".join(action.option_strings)
            if action.nargs != 0:
                metavar = action.metavar or action.dest.upper()
                name += f" {metavar}"
        else:
            name = str(action.metavar or action.dest)
            if action.nargs in ("+", "*"):
                name += " ..."
        detail = action.help or ""
        if action.choices is not None and not isinstance(action.choices, dict):
            detail += f" (one of: {', '.join(str(c) for c in action.choices)})"
        default = action.default
        shown = default not in (None, argparse.SUPPRESS) and "default" not in detail
        if action.option_strings and action.nargs != 0 and shown:
            detail += f" (default: {default})"
        rows.append(f"| `{name}` | {_cell(detail)} |")
    return rows


def cli_reference() -> str:
    from weeble.cli import build_parser

    parser = build_parser()
    lines = [
        "# Command-line reference",
        "",
        "Generated from the argparse definitions (`weeble/cli.py`, `weeble/commands/`) by",
        "`python scripts/gen_reference.py`; a test fails when this page is stale. Every command",
        "prints `weeble: error: ...` naming the problem and exits 2 on a user error.",
        "",
    ]
    subcommands = _subcommands(parser)
    lines += ["| command | what it does |", "|---|---|"]
    helps = {a.dest: a.help for a in next(
        a for a in parser._actions if isinstance(a, argparse._SubParsersAction))._choices_actions}
    for name in subcommands:
        lines.append(f"| [`weeble {name}`](#weeble-{name}) | {_cell(helps.get(name) or '')} |")
    lines.append("")
    for name, sub in subcommands.items():
        sub.formatter_class = _formatter
        lines += [f"## weeble {name}", "", "```text", sub.format_usage().strip(), "```", ""]
        if sub.description:
            lines += [" ".join(sub.description.split()), ""]
        nested = _subcommands(sub)
        rows = _argument_rows(sub)
        if rows:
            lines += ["| argument | meaning |", "|---|---|", *rows, ""]
        for inner_name, inner in nested.items():
            inner.formatter_class = _formatter
            lines += [f"### weeble {name} {inner_name}", "", "```text",
                      inner.format_usage().strip(), "```", ""]
            if inner.description:
                lines += [" ".join(inner.description.split()), ""]
            inner_rows = _argument_rows(inner)
            if inner_rows:
                lines += ["| argument | meaning |", "|---|---|", *inner_rows, ""]
    return "\n".join(lines).rstrip() + "\n"


# ---- the scenario schema ----------------------------------------------------------------------


@functools.cache
def _comments(cls: type) -> dict[str, str]:
    """field name -> the comments beside it, right above it, and continuing below it, in the
    class body of `cls` (not its bases)."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    lines = source.splitlines()
    comment_at: dict[int, str] = {}
    code_lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comment_at[tok.start[0]] = tok.string.lstrip("#").strip()
        elif tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                              tokenize.ENDMARKER):
            code_lines.update(range(tok.start[0], tok.end[0] + 1))
    body_indent = None
    out: dict[str, str] = {}
    for n, line in enumerate(lines, start=1):
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if n == 1 or not stripped or stripped.startswith(("#", "@", "def ", "class ", '"')):
            continue
        if body_indent is None:
            body_indent = indent
        if indent != body_indent or ":" not in stripped:
            continue
        name = stripped.split(":", 1)[0].strip()
        if not name.isidentifier() or name.startswith("_"):
            continue
        parts: list[str] = []
        above = n - 1
        while above in comment_at and above not in code_lines:
            above -= 1
        parts += [comment_at[k] for k in range(above + 1, n)]
        if n in comment_at:
            parts.append(comment_at[n])
        below = n + 1
        while below in comment_at and below not in code_lines and \
                len(lines[below - 1]) - len(lines[below - 1].lstrip()) > body_indent:
            parts.append(comment_at[below])
            below += 1
        out[name] = " ".join(p for p in parts if p)
    return out


def _field_comment(model: type[BaseModel], name: str) -> str:
    for cls in model.__mro__:
        if isinstance(cls, type) and issubclass(cls, BaseModel) and \
                name in inspect.get_annotations(cls):
            return _comments(cls).get(name, "")
    return ""


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation mentions, in order."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        for m in _models_in(arg):
            if m not in found:
                found.append(m)
    return found


def _anchor(model: type[BaseModel]) -> str:
    return model.__name__.lower()


def _type(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is type(None):
        return "null"
    if origin is typing.Annotated:
        return _type(args[0])
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type(a) for a in args)
    if origin is typing.Literal:
        return " \\| ".join(f"`{a!r}`" if not isinstance(a, str) else f'`"{a}"`' for a in args)
    if origin in (list, tuple, dict):
        inner = [_type(a) for a in args if a is not Ellipsis]
        if origin is tuple and args and args[-1] is Ellipsis:
            return f"list of {inner[0]}"
        if origin is tuple:
            return f"[{', '.join(inner)}]"
        if origin is dict:
            return f"map {inner[0]} → {inner[1]}"
        return f"list of {inner[0]}"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " \\| ".join(f'`"{m.value}"`' for m in annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{_anchor(annotation)})"
    if isinstance(annotation, type):
        return {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(
            annotation.__name__, annotation.__name__)
    return str(annotation).replace("typing.", "")


def _constraints(info: FieldInfo) -> str:
    marks = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<", "min_length": "at least",
             "max_length": "at most", "pattern": "matches"}
    out = []
    for m in info.metadata:
        for attr, sign in marks.items():
            value = getattr(m, attr, None)
            if value is not None:
                out.append(f"{sign} {value}" if attr not in ("min_length", "max_length")
                           else f"{sign} {value} item(s)")
    return ", ".join(out)


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "**required**"
    if info.default_factory is not None:
        return "(empty)"
    value = info.default
    if isinstance(value, BaseModel):
        return "(its defaults)"
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'`"{value}"`'
    if value == [] or value == {} or value == ():
        return "(empty)"
    return f"`{value}`"


def _model_section(model: type[BaseModel], where: str) -> list[str]:
    lines = [f'<a id="{_anchor(model)}"></a>', f"## {model.__name__}", ""]
    lines += [f"Where: {where}.", ""]
    doc = inspect.getdoc(model)
    if doc and model.__doc__ is not None and "A base class for creating Pydantic" not in doc:
        lines += [" ".join(doc.split()), ""]
    lines += ["| field | type | default | constraints | meaning |", "|---|---|---|---|---|"]
    for name, info in model.model_fields.items():
        key = info.alias or name
        lines.append(f"| `{key}` | {_type(info.annotation)} | {_default(info)} | "
                     f"{_constraints(info)} | {_cell(_field_comment(model, name))} |")
    return [*lines, ""]


def scenario_reference() -> str:
    from weeble.model.scenario import Scenario

    order: list[type[BaseModel]] = []
    where: dict[type[BaseModel], str] = {}
    queue: list[tuple[type[BaseModel], str]] = [(Scenario, "a scenario file's top level")]
    while queue:
        model, path = queue.pop(0)
        if model in where:
            continue
        where[model] = path
        order.append(model)
        for name, info in model.model_fields.items():
            for inner in _models_in(info.annotation):
                queue.append((inner, f"`{name}` of [{model.__name__}](#{_anchor(model)})"))
    lines = [
        "# Scenario schema",
        "",
        "Generated from the pydantic models (`weeble/model/scenario.py`, and the experiment,",
        "fault and selector models of `weeble/model/`) by `python scripts/gen_reference.py`; a",
        "test fails when this page is stale. A scenario is a YAML file whose top level is a",
        "[Scenario](#scenario); unknown fields are refused, naming the closest valid one. A",
        "field's meaning is the comment beside it in the model's source. What the sections do",
        "is in the [user guide](../guide/index.md); the trace a run writes is in",
        "[the trace schema](../trace-schema.md).",
        "",
        "Contents: " + ", ".join(f"[{m.__name__}](#{_anchor(m)})" for m in order),
        "",
    ]
    for model in order:
        lines += _model_section(model, where[model])
    return "\n".join(lines).rstrip() + "\n"


PAGES = {CLI_DOC: cli_reference, SCENARIO_DOC: scenario_reference}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if a page is stale instead of rewriting it")
    args = parser.parse_args(argv)
    stale = []
    for path, render in PAGES.items():
        text = render()
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(path.relative_to(ROOT))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if stale:
        print(f"stale: {', '.join(map(str, stale))}: run python scripts/gen_reference.py",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
