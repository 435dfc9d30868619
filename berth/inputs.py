"""Reading the files users give berth: a path, or `-` for standard input.

Text is UTF-8 (with or without a byte order mark) or UTF-16/UTF-32 with one, as Windows PowerShell
writes `kubectl get -o yaml > f`. Anything else is refused in one line naming the file, before YAML
could misread it. A file holds YAML documents or JSON (what `kubectl get -o json` writes, read at JSON
speed); `List` kinds are flattened into their items.

Standard input is read once and kept, so a command that reads its input twice (capacity reads the
cluster again for each pod shape) sees the same text.
"""

from __future__ import annotations

import codecs
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import yaml

from berth.errors import InputError

STDIN = "-"
# libyaml when PyYAML was built with it: the pure-Python loader takes minutes on 150k pods.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Longest first: UTF-32 LE's mark begins with UTF-16 LE's.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_stdin: bytes | None = None


def label(path: str | Path) -> str:
    """How errors name the input."""
    return "<stdin>" if str(path) == STDIN else str(path)


def read_bytes(path: str | Path) -> bytes:
    global _stdin
    if str(path) == STDIN:
        if _stdin is None:
            _stdin = sys.stdin.buffer.read()
        return _stdin
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=label(path)) from exc


def decode(data: bytes, source: str) -> str:
    """The text of a file's bytes: UTF-8, or the encoding its byte order mark names."""
    for mark, encoding in _BOMS:
        if data.startswith(mark):
            try:
                return data.decode(encoding)
            except UnicodeDecodeError as exc:
                raise InputError(f"not valid {encoding.upper()} text ({exc.reason})", source=source) from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); save it as UTF-8, "
            "or UTF-16 with a byte order mark",
            source=source,
        ) from exc
    if "\x00" in text:
        # UTF-16 without its mark decodes as UTF-8 full of NULs: no YAML or JSON file has one.
        raise InputError("not text (NUL bytes): UTF-16 needs a byte order mark", source=source)
    return text


def read_text(path: str | Path) -> str:
    """The text of a file or of standard input (`-`)."""
    return decode(read_bytes(path), label(path))


def parse_documents(text: str, source: str) -> list[Any]:
    """The documents of YAML or JSON text, as parsed (empty documents left out)."""
    if text.lstrip()[:1] in ("{", "["):
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            pass  # YAML reads it (JSON is YAML), and names the error
        else:
            return [] if value is None else [value]
    try:
        return [d for d in yaml.load_all(text, Loader=_YAML_LOADER) if d is not None]
    except yaml.YAMLError as exc:
        raise InputError(f"not valid YAML or JSON: {_yaml_problem(exc)}", source=source) from exc


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """One line: what is wrong and where (PyYAML's own text spans several lines with the source)."""
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc).splitlines()[0]
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"


def read_documents(path: str | Path) -> list[dict[str, Any]]:
    """Every Kubernetes object of a file or of standard input (`-`), `List` kinds flattened; an input
    that holds anything but objects is refused, naming it."""
    source = label(path)
    return list(_flatten(parse_documents(read_text(path), source), source))


def _flatten(docs: list[Any], source: str) -> Iterator[dict[str, Any]]:
    for doc in docs:
        if isinstance(doc, list):  # a JSON array of objects
            yield from _flatten(doc, source)
            continue
        if not isinstance(doc, dict):
            raise InputError(
                f"expected Kubernetes objects, found {_kind_of(doc)} {_excerpt(doc)}", source=source
            )
        kind = doc.get("kind", "")
        if not isinstance(kind, str):
            raise InputError(f"kind should be a string, found {_excerpt(kind)}", source=source)
        if kind.endswith("List") and "items" in doc:
            items = doc["items"]
            if items is None:
                continue  # `kubectl get` of nothing writes items: []; null is as empty
            if not isinstance(items, list):
                raise InputError(f"{kind}.items should be a list, found {_kind_of(items)}", source=source)
            yield from _flatten(items, source)
        else:
            yield doc


def _kind_of(value: Any) -> str:
    return {str: "a string", int: "a number", float: "a number", bool: "a boolean", list: "a list"}.get(
        type(value), type(value).__name__
    )


def _excerpt(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
