"""The layers of the tree, read from its source: no import circle (imports inside functions and under
TYPE_CHECKING count), and each layer imports only those below it (docs/engine.md, "Layers"):

    errors, annotations, json_annotation, inputs, version, certs    (leaves)
    cluster            the model, the view, the API client
    engine             decide(), the step contract
    vocab              the vocabularies' steps, compiled into the engine's terms
    configure          a configuration's chain, its names resolved to steps (a Pipeline)
    analysis           audit, room, preemption, rebalance, simulate_diff, validate
    report, output, evict
    extender | operator                             (the servers; neither imports the other)
    cli, then kubectl_plugin                        (the commands)
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "berth"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _resolve(target: str) -> str | None:
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


def _imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in MODULES.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                targets = [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                found = _resolve(target)
                if found and found != name:
                    graph[name].add(found)
    return graph


IMPORTS = _imports()


def _cycles() -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in IMPORTS[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for module in sorted(MODULES):
        if module not in index:
            visit(module)
    return out


def test_the_graph_is_read_from_the_tree():
    # A check that reads nothing passes anything: the edges everyone knows are there.
    assert "berth.engine.pipeline" in IMPORTS["berth.configure"]
    assert "berth.cluster.view" in IMPORTS["berth.engine.step"]
    assert len(MODULES) > 50


def test_there_is_no_import_circle():
    assert _cycles() == []


LEAVES = (
    "berth.errors",
    "berth.annotations",
    "berth.json_annotation",
    "berth.inputs",
    "berth.version",
    "berth.certs",
)
CORE = (*LEAVES, "berth.cluster", "berth.engine", "berth.vocab", "berth.configure")
PRESENTATION = ("berth.report", "berth.output", "berth.evict")
# What each layer may import besides the package's own __init__ (its version).
ALLOWED = {
    "leaves": LEAVES,
    "berth.cluster": (*LEAVES, "berth.cluster"),
    "berth.engine": (*LEAVES, "berth.cluster", "berth.engine"),
    "berth.vocab": (*LEAVES, "berth.cluster", "berth.engine", "berth.vocab"),
    "berth.configure": CORE,
    "berth.analysis": (*LEAVES, "berth.cluster", "berth.engine", "berth.vocab", "berth.analysis"),
    **dict.fromkeys(PRESENTATION, (*CORE, "berth.analysis", *PRESENTATION)),
    "berth.extender": (*CORE, "berth.analysis", "berth.extender"),
    "berth.operator": (*CORE, "berth.analysis", "berth.operator"),
    "berth.cli": (*CORE, "berth.analysis", *PRESENTATION, "berth.extender", "berth.operator", "berth.cli"),
    "berth.kubectl_plugin": (*LEAVES, "berth.cli"),
}


def test_every_module_is_on_a_floor():
    floors = (*LEAVES, *(k for k in ALLOWED if k != "leaves"))
    assert sorted(m for m in MODULES if m != "berth" and not _under(m, floors)) == []


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_a_layer_imports_only_the_layers_below_it(layer):
    members = LEAVES if layer == "leaves" else (layer,)
    wrong = sorted(
        (module, target)
        for module, targets in IMPORTS.items()
        if _under(module, members)
        for target in targets
        if target != "berth" and not _under(target, ALLOWED[layer])
    )
    assert wrong == []


# The engine's surface for the steps of a vocabulary (docs/engine.md, "Writing a step"): the step bases,
# the PodContext with its fast-path helpers, and the records of a decision. The ledger, the candidate
# sets' slots and memos, the chain runner and decide() are the engine's own.
STEP_SURFACE = ("berth.engine.step", "berth.engine.types")


def test_the_vocabularies_use_only_the_engine_s_surface_for_steps():
    private = sorted(
        (module, target)
        for module, targets in IMPORTS.items()
        if _under(module, ("berth.vocab",))
        for target in targets
        if _under(target, ("berth.engine",)) and target not in STEP_SURFACE
    )
    assert private == []


def test_no_two_modules_or_classes_share_a_name():
    # A name says which module or class it is without its package: `Found` or `capacity` once.
    modules = [p.stem for p in PACKAGE.rglob("*.py") if p.stem not in ("__init__", "__main__")]
    classes = [
        node.name
        for path in PACKAGE.rglob("*.py")
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.ClassDef)
    ]
    assert sorted({m for m in modules if modules.count(m) > 1}) == []
    assert sorted({c for c in classes if classes.count(c) > 1}) == []


# The extender's rooms (berth/extender/placer.py's docstring): the Placer holds the verbs and their
# order and imports its concerns; a concern imports neither the Placer nor the HTTP surface, and only
# the modules below it among the concerns (decisions and pod_events are the lowest).
CONCERNS = ("decisions", "pod_events", "preempt", "requeue", "sample")
SURFACE = ("placer", "app", "serve", "protocol", "openapi", "scrape")


@pytest.mark.parametrize("concern", CONCERNS)
def test_an_extender_concern_imports_no_verb_or_http_module(concern):
    module = f"berth.extender.{concern}"
    assert module in MODULES
    assert sorted(t for t in IMPORTS[module] if t in {f"berth.extender.{s}" for s in SURFACE}) == []


def test_the_commands_and_the_analyses_read_the_placement_record_without_the_extender():
    readers = ("berth.cli.explain_cmd", "berth.analysis.rebalance", "berth.cluster.convert")
    for reader in readers:
        assert "berth.cluster.placement_record" in IMPORTS[reader], reader
        assert not any(_under(t, ("berth.extender",)) for t in IMPORTS[reader]), reader
