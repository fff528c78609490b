"""The reference pages, generated from the code at build time (an MkDocs hook).

A page asks for a generated block with a marker line, ``<!-- sago:NAME -->``: ``cli`` (every
command and option, from ``sago_cli.main.build_parser``), ``config`` (every key of the run
configuration, from ``RunConfig.model_json_schema()``), ``api`` (the Python API ``sago``, from
its docstrings), ``study`` (the consistency study's,
from ``StudyConfig``), ``artifacts`` (every artifact's
columns, from ``sago_core/artifacts/schemas.py``) and ``datasets`` (the named datasets'
folders and files under ``--data-dir``). Nothing here is written by hand, so the reference
cannot drift from the code; an unknown marker fails the build.
"""

from __future__ import annotations

import argparse
import ast
import functools
import html
import inspect
import io
import json
import re
import tokenize
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

# Pieces of other schemas, not artifacts of their own.
FRAGMENTS = {"VARIANT_KEY"}
MARKER = re.compile(r"^<!-- sago:([a-z]+) -->$", re.MULTILINE)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs hook: replace each marker line with its generated Markdown."""

    def expand(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ValueError(f"{page.file.src_path}: unknown reference marker {name!r}")
        return GENERATORS[name]()

    return MARKER.sub(expand, markdown)


CONSTANT = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")
PACKAGE = Path(__file__).resolve().parents[2] / "sago_core"


@functools.cache
def constants() -> dict[str, str]:
    """Every module-level constant of ``sago_core`` with a literal number or string value,
    as a user page writes it: a comment that names ``ONSET_FRACTION`` reads "0.5" there."""
    found: dict[str, str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            target = node.targets[0] if isinstance(node, ast.Assign) else None
            if isinstance(node, ast.AnnAssign):
                target = node.target
            value = getattr(node, "value", None)
            literal = value.value if isinstance(value, ast.Constant) else None
            named = isinstance(target, ast.Name) and CONSTANT.fullmatch(target.id)
            if named and isinstance(target, ast.Name) and isinstance(literal, int | float | str):
                found[target.id] = str(literal)
    return found


def for_users(value: str) -> str:
    """A code comment or docstring as a user page says it: each named constant replaced by
    its value (the code stays the one owner of the value)."""
    known = constants()
    return CONSTANT.sub(lambda m: known.get(m.group(0), m.group(0)), value)


def text(value: str) -> str:
    """Prose for a Markdown table cell: HTML escaped outside `code`, pipes escaped."""
    pieces = for_users(value).replace("``", "`").split("`")
    for i in range(0, len(pieces), 2):  # outside backticks
        pieces[i] = html.escape(pieces[i], quote=False).replace("*", r"\*")
    return "`".join(pieces).replace("|", r"\|").replace("\n", " ")


def code(value: str) -> str:
    """A value as inline code in a table cell (backticks inside get a wider fence)."""
    value = value.replace("|", r"\|")
    return f"`` {value} ``" if "`" in value else f"`{value}`"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------- the command line


def cli_reference() -> str:
    from sago_cli.main import build_parser

    parser = build_parser()
    commands = _subcommands(parser)
    summary = [(f"[`sago {name}`](#sago-{name})", text(help_)) for name, help_, _ in commands]
    out = [
        "Generated from `sago_cli.main.build_parser`: `sago COMMAND --help` prints the same.",
        "",
        table(("command", "what it does"), summary),
    ]
    for name, help_, sub in commands:
        out += _command_section(f"sago {name}", help_, sub, "##")
    return "\n".join(out) + "\n"


def _command_section(
    words: str, help_: str, parser: argparse.ArgumentParser, level: str
) -> list[str]:
    """One command's heading, help, usage and options, then each of its subcommands'
    (``sago compare paired``) one level down."""
    out = ["", f"{level} {words}", "", text(help_), ""]
    if parser.description and parser.description != help_:
        out += [text(parser.description), ""]
    out += ["```text", parser.format_usage().strip(), "```", "", _options(parser)]
    for name, sub_help, sub in _subcommands(parser):
        out += _command_section(f"{words} {name}", sub_help, sub, level + "#")
    return out


def _subcommands(
    parser: argparse.ArgumentParser,
) -> list[tuple[str, str, argparse.ArgumentParser]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                found.append((name, helps.get(name, ""), sub))
    return found


def _options(parser: argparse.ArgumentParser) -> str:
    formatter = parser._get_formatter()
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue  # a subcommand has its own section
        if action.help == argparse.SUPPRESS:
            continue
        names = ", ".join(action.option_strings) or action.dest
        if action.choices is not None:
            value = " \\| ".join(code(str(c)) for c in action.choices)
        elif action.nargs == 0:
            value = "flag"
        else:
            metavar = action.metavar or action.dest.upper()
            value = code(metavar if isinstance(metavar, str) else " ".join(metavar))
        help_ = formatter._expand_help(action) if action.help else ""
        rows.append((code(names), value, text(help_)))
    return table(("option", "value", "meaning"), rows)


# ---------------------------------------------------------------- the run configuration


def _config_modules() -> list[ModuleType]:
    """Every module of the configuration package, whose field comments are the notes."""
    import importlib
    import pkgutil

    from sago_core import config

    names = sorted(m.name for m in pkgutil.iter_modules(config.__path__))
    return [importlib.import_module(f"sago_core.config.{name}") for name in names]


def config_reference() -> str:
    from sago_core import config

    return _model_reference(config.RunConfig, "sago_core.config", _config_modules())


def study_reference() -> str:
    from sago_core.study import config as study

    module = "sago_core.study.config"
    return _model_reference(study.StudyConfig, module, [study, *_config_modules()])


# A section documented on a page of its own: its key links there instead of repeating it.
ELSEWHERE = {"RunConfig": "config.md"}


def _model_reference(model: Any, module: str, sources: list[ModuleType]) -> str:
    schema = model.model_json_schema()
    defs = schema.get("$defs", {})
    notes: dict[tuple[str, str], str] = {}
    for source in sources:
        notes |= _field_notes(inspect.getsource(source))
    sections: list[tuple[str, str, dict[str, Any]]] = []
    folders = dict.fromkeys(
        source.__name__.rpartition(".")[0].replace(".", "/") for source in sources
    )
    files = ", ".join(f"`{folder}/`" for folder in folders)
    out = [
        f"Generated from `{module}.{model.__name__}.model_json_schema()`; the notes are the "
        f"comments beside each field in its module under {files}.",
        "",
        prose(schema.get("description", "")),
        "## Top-level keys",
        "",
        _keys(schema, model.__name__, "", defs, notes, sections),
    ]
    while sections:
        path, name, section = sections.pop(0)
        out += ["", f"## {path}", ""]
        out.append(prose(section.get("description", "")))
        out.append(_keys(section, name, path + ".", defs, notes, sections))
    return "\n".join(out) + "\n"


def prose(value: str) -> str:
    """A docstring as Markdown paragraphs (each followed by a blank line)."""
    paragraphs = inspect.cleandoc(value).split("\n\n") if value.strip() else []
    return "".join(text(p) + "\n\n" for p in paragraphs)


def _keys(
    schema: dict[str, Any],
    name: str,
    prefix: str,
    defs: dict[str, Any],
    notes: dict[tuple[str, str], str],
    sections: list[tuple[str, str, dict[str, Any]]],
) -> str:
    rows = []
    required = set(schema.get("required", ()))
    for key, prop in schema.get("properties", {}).items():
        path = prefix + key
        nested = _object_of(prop, defs)
        if nested is not None and nested[0] in ELSEWHERE:
            kind = f"[{nested[0]}]({ELSEWHERE[nested[0]]})"
        elif nested is not None:
            sections.append((path, *nested))
            kind = f"[section](#{_anchor(path)})"
        else:
            kind = text(_type(prop, defs))
        if key in required:
            default = "required"
        elif "default" in prop and nested is None:
            default = code(json.dumps(prop["default"]))
        else:
            default = ""
        note = prop.get("description") or notes.get((name, key), "")
        bounds = _constraints(prop)
        if note and bounds:
            note = f"{note} ({bounds})"
        rows.append((code(path), kind, default, text(note or bounds)))
    return table(("key", "type", "default", "notes"), rows)


def _field_notes(source: str) -> dict[tuple[str, str], str]:
    """(class, field) -> the comment beside the field, or the comment lines just above it."""
    lines = source.splitlines()
    comments = dict(_comments(source))
    notes = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef):
            for field in node.body:
                if isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name):
                    note = _note_at(field.lineno, lines, comments)
                    if note:
                        notes[(node.name, field.target.id)] = note
    return notes


def _anchor(path: str) -> str:
    return re.sub(r"[^a-z0-9_-]", "", path.lower())


def _object_of(prop: dict[str, Any], defs: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The model a key holds (by reference, possibly or-null) with its name, else None."""
    for option in prop.get("anyOf", [prop]):
        ref = option.get("$ref")
        if ref:
            name = ref.rsplit("/", 1)[-1]
            if "properties" in defs[name]:
                return name, defs[name]
    return None


def _resolve(prop: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = prop.get("$ref")
    return defs[ref.rsplit("/", 1)[-1]] if ref else prop


def _type(prop: dict[str, Any], defs: dict[str, Any]) -> str:
    if "anyOf" in prop:
        return " or ".join(_type(option, defs) for option in prop["anyOf"])
    prop = _resolve(prop, defs)
    if "enum" in prop:
        return "one of " + ", ".join(json.dumps(v) for v in prop["enum"])
    if "const" in prop:
        return json.dumps(prop["const"])
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_type(prop.get('items', {}), defs)}"
    if kind == "object":
        values = prop.get("additionalProperties")
        return f"map to {_type(values, defs)}" if isinstance(values, dict) else "mapping"
    return str(kind)


def _constraints(prop: dict[str, Any]) -> str:
    bounds = {
        "minimum": ">=",
        "exclusiveMinimum": ">",
        "maximum": "<=",
        "exclusiveMaximum": "<",
        "minItems": "items >=",
        "maxItems": "items <=",
    }
    found = []
    for option in [prop, *prop.get("anyOf", ())]:
        found += [f"{sign} {option[key]}" for key, sign in bounds.items() if key in option]
    return ", ".join(found)


# ---------------------------------------------------------------- the artifacts


def artifacts_reference() -> str:
    from sago_core.artifacts import layout, schemas

    source = inspect.getsource(schemas)
    comments = dict(_comments(source))
    out = ["Generated from `sago_core/artifacts/schemas.py` (column order is the order on disk)."]
    for name, node in _schema_definitions(source):
        if name in FRAGMENTS:
            continue
        columns = schemas.instances_schema() if name == "INSTANCES" else getattr(schemas, name)
        file_name = getattr(layout, f"{name}_FILE", None)
        title = f"`{file_name}`" if file_name else f"`{name}`"
        notes = _column_notes(node, source, comments)
        rows = [(code(c), code(str(t)), text(notes.get(c, ""))) for c, t in columns.items()]
        out += ["", f"### {title}", "", table(("column", "type", "notes"), rows)]
    return "\n".join(out) + "\n"


def _schema_definitions(source: str) -> Iterator[tuple[str, ast.AST]]:
    """Every schema of the module, in source order, with the syntax that declares it."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if isinstance(node.annotation, ast.Name) and node.annotation.id == "Schema":
                yield node.target.id, node
        elif isinstance(node, ast.FunctionDef) and node.name == "instances_schema":
            yield "INSTANCES", node


def _comments(source: str) -> Iterator[tuple[int, str]]:
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string.lstrip("#").strip()


def _column_notes(node: ast.AST, source: str, comments: dict[int, str]) -> dict[str, str]:
    """Each column's comment, for the columns named by a string literal in ``node``."""
    lines = source.splitlines()
    notes = {}
    for found in ast.walk(node):
        if isinstance(found, ast.Dict):
            for key in found.keys:
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    note = _note_at(key.lineno, lines, comments)
                    if note:
                        notes[key.value] = note
    return notes


def _note_at(line: int, lines: list[str], comments: dict[int, str]) -> str:
    """The comment at the end of ``line``, else the comment lines just above it."""
    if line in comments and not lines[line - 1].lstrip().startswith("#"):
        return comments[line]
    above: list[str] = []
    while line - 1 in comments and lines[line - 2].lstrip().startswith("#"):
        line -= 1
        above.insert(0, comments[line])
    return " ".join(above)


# ---------------------------------------------------------------- the named datasets


def datasets_reference() -> str:
    from sago_core.data.datasets import SOURCES

    rows = [
        (code(s.name), code(f"<data-dir>/{s.folder}/"), ", ".join(code(p) for p in s.patterns))
        for s in SOURCES.values()
    ]
    return (
        "Generated from `sago_core.data.datasets.SOURCES`: where `--data-dir` is read. The "
        "first file matching a pattern, in the order listed, is the dataset's file.\n\n"
        + table(("dataset", "folder", "file (first match)"), rows)
        + "\n"
    )


# ---------------------------------------------------------------- the Python API


def api_reference() -> str:
    """Every name ``sago`` exports: a function's signature and docstring, a class' docstring
    and its public members' (``RunResult.summary``, ...)."""
    import sago

    out = ["Generated from the docstrings of the `sago` package."]
    for name in sago.__all__:
        obj = getattr(sago, name)
        out += ["", f"## sago.{name}", ""]
        if inspect.isclass(obj):
            out += [prose(inspect.getdoc(obj) or ""), ""]
            for member, value in vars(obj).items():
                if member.startswith("_"):
                    continue
                doc = inspect.getdoc(value) or ""
                if isinstance(value, property | functools.cached_property) or callable(value):
                    line = f"- `{name}.{member}`"
                    out += [f"{line}: {prose(doc).strip()}" if doc else line]
            fields = getattr(obj, "__dataclass_fields__", {})
            out += [f"- `{name}.{field}`" for field in fields]
        else:
            signature = str(inspect.signature(obj)).replace("'", "")
            out += [
                "```python",
                f"sago.{name}{signature}",
                "```",
                "",
                prose(inspect.getdoc(obj) or ""),
            ]
    return "\n".join(out) + "\n"


GENERATORS: dict[str, Callable[[], str]] = {
    "api": api_reference,
    "cli": cli_reference,
    "config": config_reference,
    "study": study_reference,
    "artifacts": artifacts_reference,
    "datasets": datasets_reference,
}
