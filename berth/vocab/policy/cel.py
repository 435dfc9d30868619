"""RULE_BASED rules: CEL expressions compiled once, evaluated per candidate node.

The rule sees one variable, `ctx`:

    ctx.allocation.node.executorId   the node's uid (its name when the uid is unknown)
    ctx.allocation.node.hostname     the node's name
    ctx.allocation.node.tags         every tag of the node, its hostname included (sorted list)
    ctx.allocation.node.metadata     the node's labels
    ctx.pod.name, .namespace         the pod being placed
    ctx.pod.labels, .annotations     its labels, and its berth.dev/* annotations
    ctx.pod.app.name, .app.version   app.kubernetes.io/name and app.kubernetes.io/version ("" if unset)
    ctx.pod.requests                 resource -> integer (cpu in millicores, memory in bytes)
    ctx.session.nodes                node name -> pods of the same namespace, app name and version on it
    ctx.session.count                those pods in total (the pod itself never counts)

Limits, checked when the rule compiles (a breach is a 400 naming `spec.policy.rule`):
- the expression is at most MAX_EXPRESSION_CHARS characters;
- comprehensions (all, exists, exists_one, map, filter) nest at most MAX_COMPREHENSION_NESTING deep;
- the pattern of `matches()` is a string literal of at most MAX_REGEX_CHARS characters that RE2
  compiles into at most MAX_REGEX_PROGRAM instructions (a pattern built at evaluation time could not
  be checked);
- `ctx` paths name only the fields above (a misspelt field is an error now, not a rejected node later);
- the result type is a boolean. `ctx` is a map of dynamic values to CEL, so the rule is checked a
  second time with each `ctx` path it reads declared at its own type (CONTEXT_TYPES): a rule whose
  result is then known not to be a boolean (`ctx.allocation.node.hostname`) is refused; one whose type
  stays dynamic (`ctx` read whole or by index) is checked at evaluation.
At evaluation cel-expr-python stops any rule after ITERATION_BUDGET comprehension iterations in total.

A rule that errors at evaluation, runs out of budget or returns a non-boolean rejects the node with the
error as the reason; it never raises. A rule that reads neither `ctx.pod` nor `ctx.session` depends on
the node alone, so its result is cached per node object (a changed node is a new object).

The binding converts the whole activation on every evaluation, so a session of 1000 nodes would cost
1000 map entries per candidate node. A rule that reads the session only as
`ctx.session.nodes[ctx.allocation.node.hostname]` (or `[?...]`, or `hostname in ctx.session.nodes`) and
`ctx.session.count`, the usual per-host idiom, is given the one entry it can read; and when it does not
read `ctx.pod` either, its result is cached per node object and the session values it read.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from berth.errors import RuleCompileError

MAX_EXPRESSION_CHARS = 4096
MAX_REGEX_CHARS = 1024
MAX_REGEX_PROGRAM = 2000
MAX_COMPREHENSION_NESTING = 2
# Fixed inside cel-expr-python 0.1.3 (not configurable from Python): cumulative over nested loops.
ITERATION_BUDGET = 10_000
MAX_CACHED_NODES = 65_536

COMPREHENSIONS = frozenset({"all", "exists", "exists_one", "map", "filter"})

# The shape of `ctx`: a field maps to its own fields, or to None when what is below is free-form.
CONTEXT: dict[str, Any] = {
    "allocation": {"node": {"executorId": None, "hostname": None, "tags": None, "metadata": None}},
    "pod": {
        "name": None,
        "namespace": None,
        "labels": None,
        "annotations": None,
        "app": {"name": None, "version": None},
        "requests": None,
    },
    "session": {"nodes": None, "count": None},
}


@functools.cache
def _context_types() -> dict[tuple[str, ...], Any]:
    """The CEL type of every `ctx` path (what node_context, pod_context and session_context build);
    a path missing here is a map of dynamic values."""
    t = _cel().Type
    labels = t.Map(t.STRING, t.STRING)
    return {
        ("allocation", "node", "executorId"): t.STRING,
        ("allocation", "node", "hostname"): t.STRING,
        ("allocation", "node", "tags"): t.List(t.STRING),
        ("allocation", "node", "metadata"): labels,
        ("pod", "name"): t.STRING,
        ("pod", "namespace"): t.STRING,
        ("pod", "labels"): labels,
        ("pod", "annotations"): labels,
        ("pod", "app"): labels,
        ("pod", "app", "name"): t.STRING,
        ("pod", "app", "version"): t.STRING,
        ("pod", "requests"): t.Map(t.STRING, t.INT),
        ("session", "nodes"): t.Map(t.STRING, t.INT),
        ("session", "count"): t.INT,
    }


@functools.cache
def _cel() -> Any:
    from cel_expr_python import cel

    return cel


@functools.cache
def _env() -> Any:
    cel = _cel()
    return cel.NewEnv(
        variables={"ctx": cel.Type.Map(cel.Type.STRING, cel.Type.DYN)}, extensions=_extensions()
    )


def _extensions() -> list[Any]:
    from cel_expr_python.ext import ext_optional, ext_strings

    return [ext_strings.ExtStrings(), ext_optional.ExtOptional()]


class Verdict(NamedTuple):
    """A rule's answer for one node: keep it, or why not."""

    ok: bool
    why: str = ""


TRUE = Verdict(True)


@dataclass(eq=False)
class CompiledRule:
    source: str
    expression: Any
    reads_pod: bool
    reads_session: bool
    # The session is read only through the node's own entry and the count (see the module docstring).
    session_by_host: bool = False
    reads_count: bool = False
    _cache: dict[str, tuple[Any, Any, Verdict]] = field(default_factory=dict, repr=False)

    @property
    def node_only(self) -> bool:
        """The result depends on the node alone, so it may be cached per node."""
        return not (self.reads_pod or self.reads_session)

    def evaluate(self, ctx: dict[str, Any]) -> Verdict:
        """The rule's verdict on one activation; never raises."""
        cel = _cel()
        try:
            value = self.expression.eval(data={"ctx": ctx})
        except RuntimeError as exc:
            text = _status_text(str(exc))
            if "budget" in text.lower():
                text = f"{text} (at most {ITERATION_BUDGET} comprehension iterations per evaluation)"
            return Verdict(False, f"rule failed: {text}")
        except Exception as exc:  # the binding's own conversions; a node is rejected, never a crash
            return Verdict(False, f"rule failed: {_status_text(str(exc))}")
        kind = value.type()
        if kind == cel.Type.ERROR:
            return Verdict(False, f"rule failed: {_status_text(str(value.value()))}")
        if kind != cel.Type.BOOL:
            return Verdict(False, f"rule returned {kind.name().lower()}, not a boolean")
        return TRUE if value.value() else Verdict(False, "rule returned false")

    def evaluate_node(self, node: Any, context: Callable[[], dict[str, Any]], session: Any = None) -> Verdict:
        """evaluate() on the activation `context()` builds, cached per node object when the rule
        reads only the node, or only the node and `session` (the session values it reads for this
        node); the activation is then not even built on a hit."""
        cacheable = self.node_only or (self.session_by_host and not self.reads_pod)
        if not cacheable:
            return self.evaluate(context())
        hit = self._cache.get(node.name)
        if hit is not None and hit[0] is node and hit[1] == session:
            return hit[2]
        verdict = self.evaluate(context())
        if len(self._cache) >= MAX_CACHED_NODES:
            self._cache.clear()
        self._cache[node.name] = (node, session, verdict)
        return verdict


def _status_text(text: str) -> str:
    """'NOT_FOUND: Key not found in map : "zone" [NOT_FOUND]' -> 'Key not found in map : "zone"'."""
    text = re.sub(r"^[A-Z_]+: ", "", text.strip())
    return re.sub(r"\s*\[[A-Z_]+\]$", "", text)


def _compile_errors(text: str) -> list[str]:
    """cel-cpp's compile error text, one line per error: '1:8: Syntax error: ...'."""
    parts = re.split(r"ERROR: <input>:", text)
    found = [p.strip().splitlines()[0].strip() for p in parts[1:] if p.strip()]
    return found or [_status_text(text)]


# -- static checks ---------------------------------------------------------------------------------
_TOKEN = re.compile(
    r"""
    (?P<space>\s+|//[^\n]*)
   |(?P<string>[rRbB]{0,2}(?:\"\"\"(?:\\.|[^\\])*?\"\"\"|'''(?:\\.|[^\\])*?'''
                            |"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'))
   |(?P<number>0[xX][0-9a-fA-F]+[uU]?|(?:\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)[uU]?)
   |(?P<ident>[A-Za-z_][A-Za-z0-9_]*)
   |(?P<quoted>`[^`]*`)
   |(?P<punct>.)
    """,
    re.VERBOSE | re.DOTALL,
)


class Token(NamedTuple):
    kind: str
    text: str


def tokens(source: str) -> list[Token]:
    """The rule's tokens without spaces and comments (run after the rule compiled)."""
    out = []
    for match in _TOKEN.finditer(source):
        kind = match.lastgroup or "punct"
        if kind != "space":
            out.append(Token(kind, match.group()))
    return out


_OPEN = {"(": ")", "[": "]", "{": "}"}


def _closing(toks: list[Token], start: int) -> int:
    """The index of the bracket closing the one at `start` (len(toks) if none)."""
    depth = 0
    for i in range(start, len(toks)):
        text = toks[i].text if toks[i].kind == "punct" else ""
        if text in _OPEN:
            depth += 1
        elif text in _OPEN.values():
            depth -= 1
            if depth == 0:
                return i
    return len(toks)


def _arguments(toks: list[Token], open_at: int) -> list[list[Token]]:
    close = _closing(toks, open_at)
    args: list[list[Token]] = [[]]
    depth = 0
    for tok in toks[open_at + 1 : close]:
        text = tok.text if tok.kind == "punct" else ""
        if text in _OPEN:
            depth += 1
        elif text in _OPEN.values():
            depth -= 1
        if text == "," and depth == 0:
            args.append([])
        else:
            args[-1].append(tok)
    return args


@dataclass
class _Analysis:
    problems: list[str] = field(default_factory=list)
    reads_pod: bool = False
    reads_session: bool = False
    session_by_host: bool = True
    reads_count: bool = False


def _is(tok: Token | None, text: str) -> bool:
    return tok is not None and tok.text == text and tok.kind in ("punct", "ident")


def _check_nesting(toks: list[Token], out: _Analysis) -> None:
    stack: list[bool] = []  # per open bracket: is it a comprehension's argument list
    deepest = 0
    for i, tok in enumerate(toks):
        if tok.kind != "punct":
            continue
        if tok.text in _OPEN:
            macro = (
                tok.text == "("
                and i >= 2
                and toks[i - 1].kind == "ident"
                and toks[i - 1].text in COMPREHENSIONS
                and _is(toks[i - 2], ".")
            )
            stack.append(macro)
            deepest = max(deepest, sum(stack))
        elif tok.text in _OPEN.values() and stack:
            stack.pop()
    if deepest > MAX_COMPREHENSION_NESTING:
        out.problems.append(
            f"comprehensions nest {deepest} deep; at most {MAX_COMPREHENSION_NESTING} are allowed"
        )


def _literal(tok: Token) -> Any:
    return _env().compile(tok.text).eval().value()


def _check_patterns(toks: list[Token], out: _Analysis) -> None:
    import re2

    options = re2.Options()
    options.log_errors = False
    for i, tok in enumerate(toks):
        if tok.kind != "ident" or tok.text != "matches" or not _is(_at(toks, i + 1), "("):
            continue
        member = _is(_at(toks, i - 1), ".")
        args = _arguments(toks, i + 1)
        position = 0 if member else 1
        pattern = args[position] if len(args) > position else []
        if len(pattern) != 1 or pattern[0].kind != "string" or pattern[0].text[:1] in "bB":
            out.problems.append(
                "the pattern of matches() must be a string literal (a pattern built at evaluation time "
                "cannot be checked against the limits)"
            )
            continue
        text = _literal(pattern[0])
        if not isinstance(text, str):  # pragma: no cover - a string token is a string literal
            continue
        if len(text) > MAX_REGEX_CHARS:
            out.problems.append(
                f"a matches() pattern is {len(text)} characters long; at most {MAX_REGEX_CHARS} are allowed"
            )
            continue
        try:
            size = re2.compile(text, options).programsize
        except re2.error as exc:
            detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
            out.problems.append(f"the matches() pattern {text!r} is not a valid RE2 expression: {detail}")
            continue
        if size > MAX_REGEX_PROGRAM:
            out.problems.append(
                f"the matches() pattern {text[:40]!r} compiles to {size} RE2 instructions; at most "
                f"{MAX_REGEX_PROGRAM} are allowed"
            )


def _at(toks: list[Token], i: int) -> Token | None:
    return toks[i] if 0 <= i < len(toks) else None


def _kind(tok: Token | None) -> str:
    return tok.kind if tok is not None else ""


def _check_context(toks: list[Token], out: _Analysis) -> None:
    for i, tok in enumerate(toks):
        if tok.kind != "ident" or tok.text != "ctx" or _is(_at(toks, i - 1), "."):
            continue
        path = ["ctx"]
        shape: Any = CONTEXT
        j = i + 1
        while shape is not None and _is(_at(toks, j), ".") and _kind(_at(toks, j + 1)) == "ident":
            name = toks[j + 1].text
            if name not in shape:
                known = ", ".join(f"{'.'.join(path)}.{k}" for k in shape)
                out.problems.append(f"{'.'.join([*path, name])} is not in the rule context (it has {known})")
                break
            path.append(name)
            shape = shape[name]
            j += 2
        if len(path) == 1:
            # ctx used whole or by index: assume it reads everything.
            out.reads_pod = out.reads_session = True
            out.session_by_host = False
        elif path[1] == "pod":
            out.reads_pod = True
        elif path[1] == "session":
            out.reads_session = True
            out.session_by_host = out.session_by_host and _by_host(toks, i)
            out.reads_count = out.reads_count or path[2:3] == ["count"]


_HOSTNAME = ["ctx", ".", "allocation", ".", "node", ".", "hostname"]


def _texts(toks: list[Token], start: int, count: int) -> list[str]:
    return [t.text for t in toks[start : start + count]]


def _by_host(toks: list[Token], i: int) -> bool:
    """Whether the `ctx.session...` at token i reads only the count or the node's own entry:
    `ctx.session.count`, `ctx.session.nodes[<hostname>]`, `ctx.session.nodes[?<hostname>]`, or
    `<hostname> in ctx.session.nodes`."""
    head = _texts(toks, i, 5)
    if head[:4] == ["ctx", ".", "session", "."] and head[4:] == ["count"]:
        return not _is(_at(toks, i + 5), ".") and not _is(_at(toks, i + 5), "[")
    if head != ["ctx", ".", "session", ".", "nodes"]:
        return False
    after = i + 5
    if _is(_at(toks, after), "["):
        start = after + 2 if _is(_at(toks, after + 1), "?") else after + 1
        end = start + len(_HOSTNAME)
        return _texts(toks, start, len(_HOSTNAME)) == _HOSTNAME and _is(_at(toks, end), "]")
    # `<hostname> in ctx.session.nodes`, with nothing binding tighter on either side.
    before = i - len(_HOSTNAME) - 1
    left, right = _at(toks, before - 1), _at(toks, after)
    return (
        before >= 0
        and _texts(toks, before, len(_HOSTNAME) + 1) == [*_HOSTNAME, "in"]
        and (left is None or left.text in _LOOSER)
        and not (right is not None and right.text in (".", "["))
    )


# Tokens after which `a in b` is an operand of its own (everything else binds tighter or equally).
_LOOSER = ("(", "&&", "||", "?", ":", ",", "{")


def _typed_return(source: str) -> Any:
    """The rule's result type with each `ctx.a.b` path it reads replaced by a variable of that path's
    type; DYN when that does not compile (a type mismatch the dynamic `ctx` lets through, or a path
    inside has(), which needs a field selection): the rule is then checked at evaluation."""
    cel = _cel()
    types = _context_types()
    variables: dict[str, Any] = {"ctx": cel.Type.Map(cel.Type.STRING, cel.Type.DYN)}
    spans = [(m.lastgroup or "punct", m.group(), m.span()) for m in _TOKEN.finditer(source)]
    toks = [(k, text, span) for k, text, span in spans if k != "space"]
    out, last = [], 0
    for i, (kind, text, (start, _end)) in enumerate(toks):
        before = [t[1] for t in toks[max(0, i - 2) : i]]
        if kind != "ident" or text != "ctx" or before[-1:] == ["."] or before == ["has", "("]:
            continue
        path: tuple[str, ...] = ()
        shape: Any = CONTEXT
        j = i + 1
        while isinstance(shape, dict) and j + 1 < len(toks) and toks[j][1] == "." and toks[j + 1][1] in shape:
            path += (toks[j + 1][1],)
            shape = shape[path[-1]]
            j += 2
        if not path:
            continue
        name = "berth_typed_" + "_".join(path)
        variables[name] = types.get(path, cel.Type.Map(cel.Type.STRING, cel.Type.DYN))
        out += [source[last:start], name]
        last = toks[j - 1][2][1]
    if not out:
        return cel.Type.DYN
    out.append(source[last:])
    env = cel.NewEnv(variables=variables, extensions=_extensions())
    try:
        return env.compile("".join(out)).return_type()
    except (RuntimeError, ValueError):
        return cel.Type.DYN


def check_rule(source: str) -> tuple[CompiledRule | None, list[str]]:
    """The compiled rule, or None and every problem (without the field path)."""
    if len(source) > MAX_EXPRESSION_CHARS:
        return None, [
            f"the expression is {len(source)} characters long; at most {MAX_EXPRESSION_CHARS} are allowed"
        ]
    if not source.strip():
        return None, ["must be a non-empty CEL expression"]
    cel = _cel()
    try:
        expression = _env().compile(source)
    except (RuntimeError, ValueError) as exc:
        return None, [f"does not compile: {e}" for e in _compile_errors(str(exc))]
    analysis = _Analysis()
    toks = tokens(source)
    _check_context(toks, analysis)
    _check_nesting(toks, analysis)
    _check_patterns(toks, analysis)
    returns = expression.return_type()
    if returns == cel.Type.DYN:
        returns = _typed_return(source)
    if returns != cel.Type.BOOL and returns != cel.Type.DYN:
        analysis.problems.append(f"must return a boolean, it returns {returns.name().lower()}")
    if analysis.problems:
        return None, analysis.problems
    return (
        CompiledRule(
            source=source,
            expression=expression,
            reads_pod=analysis.reads_pod,
            reads_session=analysis.reads_session,
            session_by_host=analysis.reads_session and analysis.session_by_host,
            reads_count=analysis.reads_count,
        ),
        [],
    )


def compile_rule(source: str, *, field: str = "spec.policy.rule") -> CompiledRule:
    """check_rule(), raising RuleCompileError naming `field` and listing every problem."""
    rule, problems = check_rule(source)
    if rule is None:
        raise RuleCompileError.from_problems([f"{field}: {p}" for p in problems], field=field)
    return rule


# -- the activation --------------------------------------------------------------------------------
def node_context(node: Any) -> dict[str, Any]:
    return {
        "executorId": node.uid or node.name,
        "hostname": node.name,
        "tags": sorted(node.all_tags),
        "metadata": dict(node.labels),
    }


def pod_context(pod: Any, app_name: str, app_version: str) -> dict[str, Any]:
    return {
        "name": pod.name,
        "namespace": pod.namespace,
        "labels": dict(pod.labels),
        "annotations": dict(pod.annotations),
        "app": {"name": app_name, "version": app_version},
        "requests": dict(pod.requests),
    }


def session_context(nodes: Mapping[str, int]) -> dict[str, Any]:
    return {"nodes": dict(nodes), "count": sum(nodes.values())}
