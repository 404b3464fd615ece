"""The code's layers over the whole tree (docs/architecture.md states them): what each package may import, no import
cycle between modules or between the packages of agent/, no two modules with one basename, and importing the Celery
app or the API starts no server and writes no environment. Every import counts: at the top, inside a function,
under TYPE_CHECKING, or by a literal name through importlib.import_module or agent.infra.extras.require."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# where each top-level package's files are: the server's at the root, the client's in its own distribution
ROOTS = {name: REPO for name in ("agent", "tasks", "workers", "api_stub", "ops", "bench", "tests")}
ROOTS["finagent"] = REPO / "clients" / "python" / "src"
SERVER = ("agent", "tasks", "workers", "api_stub", "ops")
NOT_PRODUCT = ("bench", "tests")

# (importer, what it must not import, why): a name covers the module or package and everything under it
RULES = [
    ("agent", ("tasks", "workers", "api_stub", "ops", *NOT_PRODUCT), "the domain core imports no outer layer"),
    ("tasks", ("ops", "api_stub", *NOT_PRODUCT), "the task bodies sit below the API and the operations tooling"),
    ("workers", ("ops", "api_stub", *NOT_PRODUCT), "the Celery app and worker runtime sit below the API and ops"),
    ("api_stub", ("workers.app", *NOT_PRODUCT), "the API finds the servers through agent.services"),
    ("ops", NOT_PRODUCT, "the benches and the tests sit on top of the operations tooling, not under it"),
    ("ops.cli", ("workers.app",), "the CLI finds the servers through agent.services"),
    ("finagent", (*SERVER, *NOT_PRODUCT), "the client installs alone, beside a service's own packages"),
]

# basenames that may repeat, each with why no longer name would say more
SHARED_BASENAMES = {
    "__init__.py": "a package's own module",
}
LAZY_IMPORTERS = {"import_module", "require"}  # importlib.import_module(name), agent.infra.extras.require(name, extra)


def imports_in(source: str, module: str, is_package: bool = False) -> dict[str, int]:
    """Every name `module` imports (a module, or a module's attribute: `from a import b` gives a and a.b), with the
    line of its first import."""
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                package = module.split(".") if is_package else module.split(".")[:-1]
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            names = [base, *(f"{base}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            if (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)) in LAZY_IMPORTERS:
                names = [node.args[0].value]
        for name in names:
            found.setdefault(name, getattr(node, "lineno", 0))
    return found


@cache
def modules() -> dict[str, Path]:
    """Every module of the tree by its dotted name."""
    out = {}
    for package, root in ROOTS.items():
        for path in (root / package).rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if "sample_corpus" in parts:
                continue
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


@cache
def raw_imports() -> dict[str, dict[str, int]]:
    return {name: imports_in(path.read_text(), name, path.name == "__init__.py") for name, path in modules().items()}


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _owner(name: str, known: dict[str, Path]) -> str | None:
    """The module of the tree that `name` is or lies in (`a.b.func` -> `a.b`); None: outside the tree."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


@cache
def module_graph() -> dict[str, dict[str, int]]:
    """module -> {module of the tree it imports: line}."""
    known = modules()
    graph: dict[str, dict[str, int]] = {}
    for module, found in raw_imports().items():
        deps = graph.setdefault(module, {})
        for name, line in found.items():
            target = _owner(name, known)
            if target and target != module:
                deps.setdefault(target, line)
    return graph


def _cycle(graph) -> list[str] | None:
    """One cycle of the directed graph (node -> successors) as a path that returns to its start, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def _cycles(graph) -> list[list[str]]:
    """One cycle through each set of nodes that reach one another (the strongly connected components)."""
    reach = {node: _reachable(graph, node) for node in graph}
    seen: set[str] = set()
    out = []
    for node in sorted(graph):
        if node in seen or node not in reach[node]:
            continue
        component = {n for n in reach[node] if node in reach.get(n, ())}
        seen |= component
        out.append(_cycle({n: [m for m in graph[n] if m in component] for n in component}) or [])
    return out


def _reachable(graph, start: str) -> set[str]:
    found: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in found:
            found.add(node)
            todo.extend(graph.get(node, ()))
    return found


def _describe(cycle: list[str]) -> str:
    graph = module_graph()
    steps = [f"{a} -> {b} ({modules()[a].relative_to(REPO)}:{graph[a][b]})" for a, b in zip(cycle, cycle[1:])]
    return "\n  ".join(steps)


# ----- the scanner and the cycle finder themselves -----

def test_the_scanner_sees_every_kind_of_import():
    source = """
from __future__ import annotations
import os.path
from typing import TYPE_CHECKING
from . import sibling
from ..models import job
if TYPE_CHECKING:
    from tasks.dispatch import Dispatcher
def later():
    from workers.app import app
    importlib.import_module("ops.local.stack")
    require("matplotlib", "report")
"""
    found = imports_in(source, "agent.pipeline.machine")
    assert {"os.path", "agent.pipeline.sibling", "agent.models.job", "tasks.dispatch.Dispatcher", "workers.app.app",
            "ops.local.stack", "matplotlib"} <= set(found)
    assert found["workers.app.app"] == 10
    assert "agent.sibling" in imports_in("from . import sibling", "agent", is_package=True)


def test_the_cycle_finder_finds_every_ring():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
    rings = _cycles({"a": {"b"}, "b": {"a", "c"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"a"}})
    assert rings == [["a", "b", "a"], ["c", "d", "e", "c"]]


def test_the_graph_covers_the_whole_tree():
    assert {name.split(".")[0] for name in modules()} == set(ROOTS)
    graph = module_graph()
    assert "finagent.models" in graph["agent.models.job"]  # the server takes the API's models from the client
    assert "agent.pipeline.tenk_stages" in graph["agent.pipeline.machine"]


# ----- the layers -----

def test_each_package_imports_only_what_its_layer_may():
    offenders = []
    for importer, forbidden, why in RULES:
        for module, found in raw_imports().items():
            if not _within(module, importer):
                continue
            for name, line in found.items():
                if any(_within(name, f) for f in forbidden):
                    offenders.append(f"{modules()[module].relative_to(REPO)}:{line} imports {name}: {why}")
    assert offenders == [], "\n".join(sorted(set(offenders)))


def test_no_two_modules_import_each_other():
    rings = _cycles(module_graph())
    assert rings == [], "import cycles:\n" + "\n".join("  " + _describe(r) for r in rings)


def _unit(module: str) -> str | None:
    """The layer unit of an agent module: its subpackage (agent.pipeline) or top-level module (agent.settings)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "agent" and len(parts) >= 2 else None


def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, deps in module_graph().items():
        if (unit := _unit(module)) is not None:
            graph.setdefault(unit, set()).update(u for d in deps if (u := _unit(d)) and u != unit)
    return graph


def test_no_import_cycle_between_the_packages_of_agent():
    graph = package_graph()
    assert {"agent.models", "agent.pipeline", "agent.tenk", "agent.work", "agent.infra", "agent.persistence"} <= set(graph)
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_pipeline_and_tenk_do_not_import_each_other_and_models_sit_at_the_bottom():
    graph = package_graph()
    assert "agent.tenk" not in graph["agent.pipeline"] and "agent.pipeline" not in graph["agent.tenk"]
    assert graph["agent.models"] <= {"agent.settings"}
    # the pure state machine reads no database, Redis or provider
    assert not graph["agent.pipeline"] & {"agent.persistence", "agent.db", "agent.providers", "agent.work", "agent.infra"}


def test_the_stages_use_only_the_machines_public_interface():
    """The 10-K and news stages get the step as a StageContext: no private member of it, and no import of machine."""
    for stage in ("agent.pipeline.tenk_stages", "agent.pipeline.news_stage"):
        tree = ast.parse(modules()[stage].read_text())
        private = [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                   and n.value.id == "step" and n.attr.startswith("_")]
        assert private == [], f"{stage} uses {private}"
        assert "agent.pipeline.machine" not in module_graph()[stage]


def test_no_two_modules_share_a_basename():
    """Bench scripts and tests are named for what they measure or test, beside the module they are about."""
    by_name: dict[str, list[str]] = {}
    for module, path in modules().items():
        if module.split(".")[0] not in NOT_PRODUCT:
            by_name.setdefault(path.name, []).append(str(path.relative_to(REPO)))
    shared = {name: sorted(paths) for name, paths in by_name.items() if len(paths) > 1 and name not in SHARED_BASENAMES}
    assert shared == {}


# ----- importing starts nothing -----

IMPORT_PROBE = """
import json, os
before = dict(os.environ)
import workers.app, api_stub.asgi, tasks.coordinator, ops.cli.main
changed = {k: v for k, v in os.environ.items() if before.get(k) != v}
print(json.dumps(changed))
"""


def test_importing_the_app_and_the_api_starts_nothing(tmp_path):
    data_dir = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")} | {"FINAGENT_DATA_DIR": str(data_dir)}
    out = subprocess.run([sys.executable, "-c", IMPORT_PROBE], cwd=REPO, env=env, capture_output=True, text=True,
                         check=True, timeout=120)
    assert json.loads(out.stdout) == {}
    assert not data_dir.exists() or list(data_dir.iterdir()) == []
