"""The code's layering: no import cycle between the packages under agent/, agent/ imports nothing from
the outer layers, and importing the Celery app or the API starts no server and writes no environment."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUTER = ("tasks", "workers", "ops", "api_stub", "bench", "tests")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every module the file imports, at the top or inside a function (TYPE_CHECKING ones included)."""
    found = set()
    module = _module_name(path)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this file's package
                package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                base = package[: len(package) - node.level + 1]
                found.add(".".join(base + ([node.module] if node.module else [])))
            elif node.module:
                found.add(node.module)
                found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def _unit(module: str) -> str | None:
    """The layer unit of an agent module: its subpackage (agent.pipeline) or top-level module (agent.settings)."""
    parts = module.split(".")
    if parts[0] != "agent" or len(parts) < 2:
        return None
    return ".".join(parts[:2])


def _exists(unit: str) -> bool:
    path = REPO / Path(*unit.split("."))
    return path.is_dir() or path.with_suffix(".py").is_file()


def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in (REPO / "agent").rglob("*.py"):
        unit = _unit(_module_name(path))
        if unit is None:
            continue
        deps = graph.setdefault(unit, set())
        for imported in _imports(path):
            target = _unit(imported)
            if target and target != unit and _exists(target):
                deps.add(target)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
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


def test_no_import_cycle_between_the_packages_of_agent():
    graph = package_graph()
    assert {"agent.models", "agent.pipeline", "agent.tenk", "agent.work", "agent.infra", "agent.persistence"} <= set(graph)
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_check_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_pipeline_and_tenk_do_not_import_each_other_and_models_sit_at_the_bottom():
    graph = package_graph()
    assert "agent.tenk" not in graph["agent.pipeline"] and "agent.pipeline" not in graph["agent.tenk"]
    assert graph["agent.models"] <= {"agent.settings"}
    # the pure state machine reads no database, Redis or provider
    assert not graph["agent.pipeline"] & {"agent.persistence", "agent.db", "agent.providers", "agent.work", "agent.infra"}


def test_agent_imports_nothing_from_the_outer_layers():
    offenders = [f"{path.relative_to(REPO)}: {name}" for path in (REPO / "agent").rglob("*.py")
                 for name in _imports(path) if name.split(".")[0] in OUTER]
    assert offenders == []


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
