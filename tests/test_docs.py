"""The guides' commands and manifests. Every `berth` command in a ```sh block parses with berth's own
CLI parser; every manifest (a ```yaml block, or a heredoc in a ```sh block) is valid YAML and passes
`berth validate`, and a values file passes the chart's schema. e2e/test_chart_docs_e2e.py runs the blocks
marked `<!-- e2e -->` on the end-to-end cluster and checks every kubectl and helm command's flags.

A marker is an HTML comment on the line before a block: `<!-- e2e -->` (runs, exits 0),
`<!-- e2e: exit N -->` (exits N), `<!-- e2e: expect "text" -->` (prints the text), or both joined by `;`.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import pytest
import yaml

from berth.analysis.validate import validate_object
from berth.cli import build_parser, main

ROOT = Path(__file__).resolve().parent.parent
GUIDES = [ROOT / "docs/user-guide.md", ROOT / "docs/operator-guide.md", ROOT / "docs/troubleshooting.md"]
DOCS = [*GUIDES, ROOT / "README.md", ROOT / "charts/berth/README.md"]
MARKER = re.compile(r"^<!-- e2e(?::\s*(?P<spec>.*?))?\s*-->$")
HEREDOC = re.compile(r"<<-?\s*'?(?P<tag>[A-Za-z_]+)'?")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence
    lang: str
    text: str
    marker: str | None  # the e2e marker's spec ("" for a bare <!-- e2e -->), None when not run

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def exit_code(self) -> int:
        found = re.search(r"exit\s+(\d+)", self.marker or "")
        return int(found.group(1)) if found else 0

    @property
    def expect(self) -> str | None:
        found = re.search(r'expect\s+"([^"]*)"', self.marker or "")
        return found.group(1) if found else None


def blocks(path: Path) -> list[Block]:
    out: list[Block] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^(\s*)```(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        start, lang, body = i, fence.group(2), []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(fence.group(1)) :])
            i += 1
        before = next((lines[j].strip() for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.match(before)
        spec = (marker.group("spec") or "") if marker else None
        out.append(Block(path, start + 1, lang, "\n".join(body), spec))
        i += 1
    return out


def shell_blocks(paths: list[Path] = DOCS) -> list[Block]:
    return [b for p in paths for b in blocks(p) if b.lang == "sh"]


def split_heredocs(text: str) -> tuple[list[str], list[tuple[str, str]]]:
    """The command lines of a shell block, and its heredocs as (target file or "", body)."""
    commands: list[str] = []
    heredocs: list[tuple[str, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        commands.append(line)
        found = HEREDOC.search(line)
        i += 1
        if found:
            body = []
            while i < len(lines) and lines[i].strip() != found.group("tag"):
                body.append(lines[i])
                i += 1
            i += 1
            target = re.search(r">\s*(\S+)", line[: found.start()])
            heredocs.append((target.group(1) if target else "", "\n".join(body)))
    return commands, heredocs


def _unquoted_newlines_to_semicolons(text: str) -> str:
    out, quote, escaped = [], "", False
    for char in text:
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "\n":
            char = ";"
        out.append(char)
    return "".join(out)


def commands(block: Block) -> list[list[str]]:
    """Every simple command of a shell block as its words: continuation lines joined, comments and
    heredoc bodies dropped, pipelines, lists, subshells and redirections split apart."""
    lines, _ = split_heredocs(block.text)
    lines = [re.sub(r"\s+#\s.*$", "", line) for line in lines if not line.lstrip().startswith("#")]
    text = _unquoted_newlines_to_semicolons(re.sub(r"\\\n", " ", "\n".join(lines)))
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>$`")
    lexer.whitespace_split = True
    lexer.commenters = ""
    out: list[list[str]] = []
    words: list[str] = []
    redirected = False
    for token in lexer:
        if set(token) <= set(";&|()<>$`"):
            out.append(words)
            words = []
            redirected = token in (">", ">>", "<", "<<", "&>")
        elif redirected:  # the file of a redirection, or a heredoc's tag
            redirected = False
        else:
            words.append(token)
    out.append(words)

    def without_assignments(words: list[str]) -> list[str]:
        while words and re.match(r"^\w+=", words[0]):
            words = words[1:]
        return words

    return [c for c in (without_assignments(w) for w in out) if c]


def program(words: list[str]) -> str:
    return Path(words[0]).name


BERTH_COMMANDS = [
    pytest.param(words, id=f"{block}: {' '.join(words)[:60]}")
    for block in shell_blocks()
    for words in commands(block)
    if program(words) == "berth"
]


def test_the_guides_have_berth_commands_and_runnable_blocks():
    assert len(BERTH_COMMANDS) >= 15
    for guide in GUIDES:
        assert any(b.marker is not None for b in shell_blocks([guide])), guide


@pytest.mark.parametrize("words", BERTH_COMMANDS)
def test_every_berth_command_in_the_docs_is_one_berth_understands(words, capsys):
    try:
        build_parser().parse_args(words[1:])
    except SystemExit as exc:
        pytest.fail(f"berth {' '.join(words[1:])}: {capsys.readouterr().err.strip()} (exit {exc.code})")


def manifests() -> list[pytest.param]:
    out = []
    for path in DOCS:
        for block in blocks(path):
            if block.exit_code != 0:
                continue  # shows a refusal on purpose
            if block.lang == "yaml":
                out.append(pytest.param("", block.text, id=f"{block} (yaml)"))
            elif block.lang == "sh":
                for target, body in split_heredocs(block.text)[1]:
                    out.append(pytest.param(target, body, id=f"{block} ({target or 'stdin'})"))
    return out


@pytest.mark.parametrize(("target", "text"), manifests())
def test_every_manifest_in_the_docs_is_valid_for_berth(target, text):
    documents = [d for d in yaml.safe_load_all(text) if d is not None]
    assert documents
    if target.endswith("values.yaml"):
        schema = json.loads((ROOT / "charts/berth/values.schema.json").read_text())
        for document in documents:
            jsonschema.validate(document, schema)
        return
    for document in documents:
        assert validate_object(document) in (None, []), document


def test_the_command_splitter_finds_each_command_of_a_pipeline():
    block = Block(
        ROOT,
        1,
        "sh",
        "NODE=$(kubectl get nodes -o name) && berth simulate --live \\\n  --pod p.yaml | head\n"
        "cat > x.yaml <<'EOF'\nkind: Pod\nEOF\nkubectl apply -f x.yaml",
        None,
    )
    assert commands(block) == [
        ["kubectl", "get", "nodes", "-o", "name"],
        ["berth", "simulate", "--live", "--pod", "p.yaml"],
        ["head"],
        ["cat"],
        ["kubectl", "apply", "-f", "x.yaml"],
    ]


OUTPUT = re.compile(r"^<!-- output of: (?P<command>berth .*?) -->$")


def output_blocks() -> list[tuple[Path, str, str]]:
    """(doc, command, block) for every block the docs say a berth command prints, as written."""
    found = []
    for path in DOCS:
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            match = OUTPUT.match(line)
            if match:
                assert lines[i + 1] == "```", f"{path}:{i + 1}: the output block follows the marker"
                end = lines.index("```", i + 2)
                found.append((path, match["command"], "\n".join(lines[i + 2 : end]) + "\n"))
    return found


@pytest.mark.parametrize(("path", "command", "shown"), output_blocks(), ids=lambda v: str(v)[:60])
def test_every_sample_output_in_the_docs_is_what_the_command_prints(
    path, command, shown, capsys, monkeypatch
):
    monkeypatch.chdir(ROOT)
    main(shlex.split(command)[1:])
    assert capsys.readouterr().out == shown, f"{path}: regenerate the output of `{command}`"


def test_the_readme_shows_what_its_simulate_command_prints():
    assert any(p.name == "README.md" and "simulate" in c for p, c, _ in output_blocks())


def test_every_path_the_readme_s_layout_names_exists():
    text = (ROOT / "README.md").read_text()
    block = text.split("## Layout\n```\n", 1)[1].split("```", 1)[0]
    # the first column, and the paths the descriptions name
    paths = [line.split()[0] for line in block.splitlines() if line.strip()]
    paths += re.findall(r"\b(?:berth|tests|charts|e2e|bench)/[\w./]+\w", block)
    assert len(paths) >= 15
    assert [p for p in paths if not (ROOT / p).exists()] == []


def _messages_in_code() -> tuple[set[str], set[str]]:
    """(the reasons of the events berth writes, the fixed words of the extender's answers), read from
    berth's source: Event("Type", "Reason", ...), kopf.info/warn(reason=...), event_body(..., "Reason",
    ...), retry_patch("Reason", ...), and every "berth: ..." string of berth/extender (an f-string by its
    first literal part of some length)."""
    import ast

    from berth.cluster.placement_record import PLANNED_EVENT

    reasons, answers = {PLANNED_EVENT}, set()
    for path in (ROOT / "berth").rglob("*.py"):
        tree = ast.parse(path.read_text())
        formatted = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                literal = [a.value for a in node.args if isinstance(a, ast.Constant)]
                if name in ("Event", "event_body") and len(literal) >= 2:
                    reasons.add(str(literal[1]))
                elif name == "retry_patch" and literal:
                    reasons.add(str(literal[0]))
                elif name in ("info", "warn") and isinstance(node.func, ast.Attribute):
                    reasons |= {k.value.value for k in node.keywords if k.arg == "reason"}
            if "extender" not in path.parts or id(node) in formatted:
                continue
            if isinstance(node, ast.Constant) and str(node.value).startswith("berth: "):
                answers.add(str(node.value))
            elif isinstance(node, ast.JoinedStr):
                parts = [str(v.value) for v in node.values if isinstance(v, ast.Constant)]
                if parts and parts[0].startswith("berth: "):
                    words = [p.removeprefix("berth: ").strip() for p in parts]
                    answers.add(next(w for w in words if len(w) >= 6))
    return reasons, answers


def test_every_event_and_every_answer_of_the_extender_is_explained_in_troubleshooting():
    reasons, answers = _messages_in_code()
    assert {"FailedPlacement", "HandedOver", "Compiled", "NeighbourLeft", "Rebalanced"} <= reasons
    assert len(answers) >= 8
    text = (ROOT / "docs/troubleshooting.md").read_text()
    reference = text.split("## Every message berth writes", 1)[1]
    assert sorted(r for r in reasons if f"`{r}`" not in reference) == []
    flat = " ".join(reference.split())
    assert sorted(a for a in answers if " ".join(a.split()) not in flat) == []


# Where the messages of a refusal or of a command's error are built, by kind: what the operator's webhook
# (and `berth validate`, and berth serve's 400) says of a pod's berth annotations and of a PlacementPolicy,
# what berth says of an allocator configuration, and the one line a berth command stops with (exit 2).
MESSAGE_SOURCES = {
    "pod annotations": (
        "berth/vocab/pod.py",
        "berth/vocab/tag_affinity.py",
        "berth/cluster/tags.py",
        "berth/json_annotation.py",
        "berth/cluster/topology.py",
        "berth/vocab/alloc/request.py",
        "berth/vocab/alloc/hints.py",
        "berth/vocab/alloc/values.py",
        "berth/vocab/alloc/patterns.py",
        "berth/operator/handlers.py",
    ),
    "policies": ("berth/vocab/policy/*.py",),
    "allocator configuration": (
        "berth/vocab/alloc/config.py",
        "berth/vocab/alloc/custom.py",
        "berth/vocab/alloc/description.py",
        "berth/configure.py",
    ),
    "commands": (
        "berth/cli/*.py",
        "berth/inputs.py",
        "berth/cluster/credentials.py",
        "berth/cluster/kubeapi.py",
        "berth/cluster/snapshot.py",
        "berth/cluster/convert.py",
        "berth/cluster/selectors.py",
        "berth/cluster/quantity.py",
        "berth/extender/serve.py",
        "berth/extender/sample.py",
        "berth/analysis/validate.py",
    ),
}
# What a message is raised as: berth's errors, those its readers turn into berth's, argparse's.
RAISED = {
    "BerthError",
    "SpecError",
    "InvalidAnnotation",
    "InvalidPolicy",
    "InvalidConfig",
    "RuleCompileError",
    "SnapshotError",
    "InputError",
    "ApiError",
    "AnnotationProblem",
    "PatternError",
    "ValueError",
    "ArgumentTypeError",
    "error",  # argparse's parser.error
    "_raise",  # berth.vocab.alloc.config's
}
PROBLEM_LIST = re.compile(r"(?:^|_)(?:problems|errors)$")
# A function whose return value is a message (or a field and its message): name_problem, _unknown.
MESSAGE_FUNCTION = re.compile(r"problem|unknown|message")


def _fixed_words(parts: list[str]) -> tuple[str, ...]:
    """The words of a message that are the same every time: its literal parts (an f-string's text
    between the braces), each without the spaces and punctuation at its ends, whitespace-normalised,
    kept when they are words (a space inside) of 6 characters or more."""
    import string

    kept = (" ".join(p.split()).strip(string.whitespace + string.punctuation) for p in parts)
    return tuple(w for w in kept if len(w) >= 6 and " " in w)


def _message_templates(source: str) -> dict[tuple[str, ...], int]:
    """The fixed words of every message a module builds, with the line of each: the first argument of
    what it raises (RAISED), what it appends to, extends or assigns to a list of problems or errors,
    the values of a *MESSAGES table, the lists it returns (`return None, [f"..."]`), whatever a
    MESSAGE_FUNCTION returns, and the local names those are built from (`hint = f" (did you mean
    {...}?)"`). A string is a constant or an f-string, also as either side of a conditional, an `or`,
    a `+`, a list, a tuple or a comprehension."""
    import ast

    def strings(node: ast.AST) -> list[tuple[list[str], int]]:
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [([node.value], line)]
        if isinstance(node, ast.JoinedStr):
            return [([str(v.value) for v in node.values if isinstance(v, ast.Constant)], line)]
        parts: list[ast.AST] = []
        if isinstance(node, ast.IfExp):
            parts = [node.body, node.orelse]
        elif isinstance(node, ast.BoolOp):
            parts = list(node.values)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            parts = [node.left, node.right]
        elif isinstance(node, ast.List | ast.Tuple):
            parts = list(node.elts)
        elif isinstance(node, ast.ListComp | ast.GeneratorExp):
            parts = [node.elt]
        return [found for part in parts for found in strings(part)]

    def returned_lists(node: ast.AST) -> list[tuple[list[str], int]]:
        if isinstance(node, ast.Tuple | ast.BoolOp):
            inner = node.elts if isinstance(node, ast.Tuple) else node.values
            return [found for part in inner for found in returned_lists(part)]
        if isinstance(node, ast.List | ast.ListComp | ast.GeneratorExp):
            return strings(node)
        return []

    def name(node: ast.AST) -> str:
        return getattr(node, "id", None) or getattr(node, "attr", None) or ""

    def positions(tree: ast.AST) -> list[ast.AST]:
        out: list[ast.AST] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and node.args:
                callee = name(node.func)
                appended = callee in ("append", "extend") and PROBLEM_LIST.search(name(node.func.value))
                if callee in RAISED or appended:
                    out.append(node.args[0])
            elif isinstance(node, ast.Assign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(PROBLEM_LIST.search(name(t)) for t in targets):
                    out.append(node.value)
                if any("MESSAGES" in name(t) for t in targets) and isinstance(node.value, ast.Dict):
                    out += node.value.values
        return out

    tree = ast.parse(source)
    found: dict[tuple[str, ...], int] = {}

    def add(pieces: list[tuple[list[str], int]]) -> None:
        for parts, line in pieces:
            words = _fixed_words(parts)
            if words:
                found.setdefault(words, line)

    for value in positions(tree):
        add(strings(value))
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        assigned: dict[str, list[ast.AST]] = {}
        for node in ast.walk(function):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        assigned.setdefault(target.id, []).append(node.value)
        names = [n.id for v in positions(function) for n in ast.walk(v) if isinstance(n, ast.Name)]
        seen: set[str] = set()
        while names:
            local = names.pop()
            if local in seen:
                continue
            seen.add(local)
            for value in assigned.get(local, ()):
                add(strings(value))
                names += [n.id for n in ast.walk(value) if isinstance(n, ast.Name)]
        reads = strings if MESSAGE_FUNCTION.search(function.name) else returned_lists
        for node in ast.walk(function):
            if isinstance(node, ast.Return) and node.value is not None:
                add(reads(node.value))
    return found


def _refusals_in_code() -> dict[str, dict[tuple[str, ...], str]]:
    """kind -> the fixed words of each message template of that kind -> where it is built."""
    out: dict[str, dict[tuple[str, ...], str]] = {}
    for kind, patterns in MESSAGE_SOURCES.items():
        templates: dict[tuple[str, ...], str] = {}
        for pattern in patterns:
            paths = sorted(ROOT.glob(pattern))
            assert paths, pattern
            for path in paths:
                for words, line in _message_templates(path.read_text()).items():
                    templates.setdefault(words, f"{path.relative_to(ROOT)}:{line}")
        out[kind] = templates
    return out


def test_the_message_collector_finds_a_message_in_each_way_berth_builds_one():
    source = (
        "def check(value, where):\n"
        "    problems = [f'{where}: unknown key {k} (a, b are read)' for k in value]\n"
        "    hint = f' (did you mean {value}?)' if value else ''\n"
        "    problems.append(f'{where}: no such thing{hint}')\n"
        "    if not value:\n"
        "        raise BerthError(f'{where}: nothing to read in it')\n"
        "    return None, [f'{where}: should be a list, not {value}']\n"
        "def name_problem(value):\n"
        "    return 'is not a valid object name' if value else None\n"
        "def shown(value):\n"
        "    return f'{value} is what it shows'\n"
    )
    assert set(_message_templates(source)) == {
        ("unknown key", "a, b are read"),
        ("did you mean",),
        ("no such thing",),
        ("nothing to read in it",),
        ("should be a list, not",),
        ("is not a valid object name",),
    }


def test_every_refusal_and_every_error_of_a_command_is_explained_in_troubleshooting():
    """The fixed words of each message template (a refusal of the operator's webhook, a problem of an
    allocator configuration, the line a berth command stops with) are quoted in the doc's reference
    part, or in its tables of files and of kubeconfigs: in a `code span`, as the tables give messages."""
    found = _refusals_in_code()
    counts = {kind: len(templates) for kind, templates in found.items()}
    assert counts["pod annotations"] >= 55, counts
    assert counts["policies"] >= 35, counts
    assert counts["allocator configuration"] >= 20, counts
    assert counts["commands"] >= 75, counts
    assert ("tags should be non-empty strings, found",) in found["pod annotations"]
    assert ("must return a boolean, it returns",) in found["policies"]
    assert ("is the name of a built-in algorithm; choose another",) in found["allocator configuration"]
    assert ("only one input can be read from standard input",) in found["commands"]
    text = (ROOT / "docs/troubleshooting.md").read_text()
    sections = [text.split("## Every message berth writes", 1)[1]]
    for title in ("## Files berth cannot read", "## Credentials and kubeconfig"):
        sections.append(text.split(f"\n{title}\n", 1)[1].split("\n## ", 1)[0])
    prose = re.sub(r"(?ms)^```.*?^```$", "", "\n".join(sections))  # without the fenced blocks
    quoted = " | ".join(" ".join((a or b).split()) for a, b in re.findall(r"``(.+?)``|`([^`]+)`", prose))
    missing = [
        f"{where} ({kind}): {' ... '.join(words)}"
        for kind, templates in found.items()
        for words, where in templates.items()
        if any(w not in quoted for w in words)
    ]
    assert sorted(missing) == []


# Where the text of a pod that no node fits is made, and the warnings berth's commands print: messages
# passed along (a step's Reason whose message a helper builds, a rule's verdict that becomes a policy's
# failure), collected by tracing each message back to the strings it is made of.
# kind -> (the files, what is called with a message: callee -> the argument's position or keyword,
# the lists whose items are messages, the functions whose return value is one).
MESSAGE_TRACES: dict[str, tuple[tuple[str, ...], dict[str, int | str], str, str]] = {
    # The 409 answer and the FailedPlacement event (berth.engine.wording.no_fit_message): the constraint()
    # of each step that removed nodes, then the count of each Reason's short text (a PlacementPolicy's
    # reason carries its Failure, a rule's the Verdict), with the notes berth serve adds to the event.
    "why no node fits": (
        ("berth/engine/*.py", "berth/vocab/**/*.py", "berth/extender/preempt.py", "berth/extender/sample.py"),
        {"Reason": 2, "Failure": 1, "Verdict": 1, "replace": "message"},
        "",
        r"^(constraint|no_fit_message|short|only_berth_blocks|unasked_note)$",
    ),
    # `berth: warning: FILE: ...` (an allocator configuration, a what-if policy) and `berth validate`'s
    # `warning: ...` lines.
    "warnings": (
        ("berth/vocab/alloc/config.py", "berth/cli/sources.py", "berth/analysis/validate*.py"),
        {"Finding": 5},
        r"^warnings$",
        r"warning",
    ),
}


def _traced_templates(
    source: str, calls: dict[str, int | str], lists: str, functions: str
) -> dict[tuple[str, ...], int]:
    """The fixed words of every message of a module, with the line of each: the argument of a call in
    `calls`, what is appended to (or assigned to) a list matching `lists`, what a function matching
    `functions` returns; each traced back to its strings through the local and module names it is built
    from, the parameters it is passed as (to what the module's calls pass), the module's functions and
    methods it calls (to what they return), the class attributes it reads (`self.what`) and `.join()`.
    An f-string is a message of its own, and so is each of its parts it is built from."""
    import ast

    tree = ast.parse(source)
    defined: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    enclosing: dict[int, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    attributes: dict[str, list[ast.AST]] = {}  # class attributes, by name
    module: dict[str, list[ast.AST]] = {}  # module-level names
    called: dict[str, list[ast.Call]] = {}  # the module's calls, by what they call
    for node in ast.walk(tree):  # outer functions first: an inner one encloses its own nodes
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            defined.setdefault(node.name, []).append(node)
            for inner in ast.walk(node):
                enclosing[id(inner)] = node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.Assign | ast.AnnAssign) and item.value is not None:
                    for target in item.targets if isinstance(item, ast.Assign) else [item.target]:
                        attributes.setdefault(getattr(target, "id", ""), []).append(item.value)
        elif isinstance(node, ast.Call):
            callee = getattr(node.func, "id", None) or getattr(node.func, "attr", None) or ""
            called.setdefault(callee, []).append(node)
    for item in tree.body:
        if isinstance(item, ast.Assign | ast.AnnAssign) and item.value is not None:
            for target in item.targets if isinstance(item, ast.Assign) else [item.target]:
                module.setdefault(getattr(target, "id", ""), []).append(item.value)

    def name(node: ast.AST) -> str:
        return getattr(node, "id", None) or getattr(node, "attr", None) or ""

    def argument(call: ast.Call, position: int | str, keyword: str = "message") -> ast.AST | None:
        """The argument at a position (or a keyword), else the one given by the keyword."""
        if isinstance(position, int) and 0 <= position < len(call.args):
            return call.args[position]
        keyword = position if isinstance(position, str) else keyword
        return next((k.value for k in call.keywords if k.arg == keyword), None)

    def local(function: ast.AST, local_name: str) -> list[ast.AST] | None:
        """What a name of the function is made of: its assignments and what is appended to it; None
        when the function never assigns it."""
        found: list[ast.AST] = []
        assigned = False
        for node in ast.walk(function):
            if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(getattr(t, "id", None) == local_name for t in targets) and node.value is not None:
                    assigned = True
                    found.append(node.value)
            elif (
                isinstance(node, ast.Call)
                and name(node.func) in ("append", "extend")
                and getattr(node.func.value, "id", None) == local_name
            ):
                found += node.args[:1]
        return found if assigned else None

    def passed(function: ast.FunctionDef | ast.AsyncFunctionDef, parameter: str) -> list[ast.AST]:
        """What the module's calls of the function pass as the parameter."""
        params = [a.arg for a in function.args.args]
        out = []
        for call in called.get(function.name, []):
            method = params[:1] in (["self"], ["cls"]) and isinstance(call.func, ast.Attribute)
            found = argument(call, params.index(parameter) - method, parameter)
            if found is not None:
                out.append(found)
        return out

    seen: set[int] = set()

    def strings(node: ast.AST | None) -> list[tuple[list[str], int]]:
        if node is None or id(node) in seen:
            return []
        seen.add(id(node))
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant):
            return [([node.value], line)] if isinstance(node.value, str) else []
        if isinstance(node, ast.JoinedStr):
            out = [([str(v.value) for v in node.values if isinstance(v, ast.Constant)], line)]
            for value in node.values:
                if isinstance(value, ast.FormattedValue):
                    out += strings(value.value)
            return out
        parts: list[ast.AST | None] = []
        if isinstance(node, ast.IfExp):
            parts = [node.body, node.orelse]
        elif isinstance(node, ast.BoolOp):
            parts = list(node.values)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            parts = [node.left, node.right]
        elif isinstance(node, ast.List | ast.Tuple):
            parts = list(node.elts)
        elif isinstance(node, ast.ListComp | ast.GeneratorExp):
            parts = [node.elt]
        elif isinstance(node, ast.Subscript):
            parts = [node.value]
        elif isinstance(node, ast.Attribute) and getattr(node.value, "id", None) == "self":
            parts = list(attributes.get(node.attr, []))
        elif isinstance(node, ast.Call):
            if name(node.func) == "join" and node.args:
                parts = [node.args[0]]
            for function in defined.get(name(node.func), []):
                parts += [r.value for r in ast.walk(function) if isinstance(r, ast.Return)]
        elif isinstance(node, ast.Name):
            function = enclosing.get(id(node))
            made = local(function, node.id) if function is not None else None
            if made is not None:
                parts = list(made)
            elif function is not None and node.id in [a.arg for a in function.args.args]:
                parts = list(passed(function, node.id))
            else:
                parts = list(module.get(node.id, []))
        return [found for part in parts for found in strings(part)]

    messages: list[ast.AST | None] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and name(node.func) in calls:
            messages.append(argument(node, calls[name(node.func)]))
        elif isinstance(node, ast.Call) and name(node.func) in ("append", "extend") and lists:
            if re.search(lists, name(node.func.value)) and node.args:
                messages.append(node.args[0])
        elif isinstance(node, ast.Assign) and lists:
            if any(re.search(lists, name(t)) for t in node.targets):
                messages.append(node.value)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and re.search(functions, node.name):
            messages += [r.value for r in ast.walk(node) if isinstance(r, ast.Return)]
    found: dict[tuple[str, ...], int] = {}
    for message in messages:
        for parts, line in strings(message):
            words = _fixed_words(parts)
            if words:
                found.setdefault(words, line)
    return found


def _traced_in_code() -> dict[str, dict[tuple[str, ...], str]]:
    """kind (of MESSAGE_TRACES) -> the fixed words of each message template -> where it is built."""
    out: dict[str, dict[tuple[str, ...], str]] = {}
    for kind, (patterns, calls, lists, functions) in MESSAGE_TRACES.items():
        templates: dict[tuple[str, ...], str] = {}
        for pattern in patterns:
            paths = sorted(ROOT.glob(pattern))
            assert paths, pattern
            for path in paths:
                for words, line in _traced_templates(path.read_text(), calls, lists, functions).items():
                    templates.setdefault(words, f"{path.relative_to(ROOT)}:{line}")
        out[kind] = templates
    return out


def _quoted(text: str) -> str:
    """Every `code span` of a part of the doc outside its fenced blocks, whitespace-normalised, joined
    by " | " (so that a message's fixed words are found within one span)."""
    prose = re.sub(r"(?ms)^```.*?^```$", "", text)
    return " | ".join(" ".join((a or b).split()) for a, b in re.findall(r"``(.+?)``|`([^`]+)`", prose))


def _subsection(title: str) -> str:
    text = (ROOT / "docs/troubleshooting.md").read_text()
    return text.split(f"\n{title}\n", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]


def test_the_message_tracer_follows_a_message_to_the_strings_it_is_made_of():
    source = (
        "LIMIT = 'the limit of the cluster'\n"
        "def _where(hint):\n"
        "    return f'is not in the {hint} of a pod'\n"
        "class Step:\n"
        "    what = 'score under the default profile'\n"
        "    def check(self, node):\n"
        "        message = f'node is below {LIMIT} this morning'\n"
        "        if node:\n"
        "            return self._unmet(f'strict locality: the node {_where(node)}')\n"
        "        return Reason(self.name, Kind.UNMET, message)\n"
        "    def _unmet(self, message):\n"
        "        return Reason(self.name, Kind.UNMET, message)\n"
        "    def set_aside(self):\n"
        "        return Reason(self.name, Kind.SET_ASIDE, f'lower {self.what} than the best nodes')\n"
        "    def constraint(self, prepared):\n"
        "        names = []\n"
        "        names.append(f'the policy {prepared} (it does not exist)')\n"
        "        return '; '.join(names)\n"
        "    def shown(self):\n"
        "        return 'not a message of any kind'\n"
    )
    assert set(_traced_templates(source, {"Reason": 2}, "", r"^constraint$")) == {
        ("node is below", "this morning"),
        ("the limit of the cluster",),
        ("strict locality: the node",),
        ("is not in the", "of a pod"),
        ("than the best nodes",),
        ("score under the default profile",),
        ("the policy", "it does not exist"),
    }


def test_why_no_node_fits_is_explained_in_troubleshooting():
    """The fixed words of the 409 text (the constraint each step names, the reason it gives each node
    it removes, wording.py's own sentences, berth serve's notes) are quoted in the doc's subsection on
    it, and the warnings berth's commands print in theirs."""
    found = _traced_in_code()
    counts = {kind: len(templates) for kind, templates in found.items()}
    assert counts["why no node fits"] >= 85, counts
    assert counts["warnings"] >= 14, counts
    no_fit = found["why no node fits"]
    assert {("no node satisfies",), ("nodes are available",), ("set aside",)} <= set(no_fit)
    assert ("pods of namespace", "on the node do not carry every required tag") in no_fit
    assert ("the node does not carry tag",) in no_fit  # a PlacementPolicy's Failure
    assert ("rule returned false",) in no_fit  # a RULE_BASED policy's Verdict
    assert ("node didn't match pod affinity rules",) in no_fit  # passed to a helper that makes the Reason
    assert ("an `or` kept other nodes",) in no_fit
    assert ("the node has no platform version",) in no_fit
    assert ("governs no running pod in namespace", "the what-if changes nothing there") in found["warnings"]
    sections = {
        "why no node fits": "### Why no node fits (the 409 and FailedPlacement)",
        "warnings": "### What berth warns about",
    }
    missing = []
    for kind, templates in found.items():
        quoted = _quoted(_subsection(sections[kind]))
        missing += [
            f"{where} ({kind}): {' ... '.join(words)}"
            for words, where in templates.items()
            if any(w not in quoted for w in words)
        ]
    assert sorted(missing) == []


# kube-scheduler's own events, which the guides show beside berth's.
KUBE_EVENTS = {"FailedScheduling", "Scheduled", "Preempted"}


def test_every_event_the_guides_name_is_one_berth_or_kube_scheduler_writes():
    reasons, _ = _messages_in_code()
    named = set()
    for path in [*GUIDES, *(ROOT / "docs" / f"{n}.md" for n in ("extender", "tag-affinity", "policies"))]:
        for line in path.read_text().splitlines():
            if "event" in line.lower():
                named |= set(re.findall(r"`([A-Z][a-z]+(?:[A-Z][a-z]+)+)`", line))
    assert {"FailedPlacement", "HadNoChoice", "FailedScheduling"} <= named
    assert sorted(named - reasons - KUBE_EVENTS) == []


def test_the_results_page_is_read_at_a_glance_and_the_history_is_newest_first():
    results = (ROOT / "bench/RESULTS.md").read_text()
    assert len(results.splitlines()) <= 250
    rows = [line for line in results.splitlines() if line.startswith("| ")]
    assert max(len(cell) for row in rows for cell in row.split("|")) <= 300
    history = (ROOT / "bench/HISTORY.md").read_text()
    order = {"early": 0, "morning": 1, "late morning": 2, "noon": 3, "early afternoon": 4, "afternoon": 5}
    order |= {"later": 6, "late afternoon": 7, "evening": 8, "late evening": 9, "night": 10, "late night": 11}
    days = []
    for title in re.findall(r"(?m)^## .*\((2026-\d\d-\d\d)(?:, ([a-z ]+))?\)$", history):
        days.append((title[0], order.get(title[1], 1)))
    assert len(days) > 30
    assert days == sorted(days, reverse=True)
    # The operator guide links to the figures rather than carrying dated ones.
    assert "2026-" not in (ROOT / "docs/operator-guide.md").read_text()
