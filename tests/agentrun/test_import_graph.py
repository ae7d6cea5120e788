"""The agentrun modules import one another one way only: no cycle, not even through an import
inside a function (the usual way a cycle is hidden rather than removed)."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "agentrun"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules() -> dict[str, Path]:
    """Every module of the package (migrations aside: Django loads those, nothing imports them)."""
    return {module_name(path): path for path in sorted((ROOT / PACKAGE).rglob("*.py")) if "migrations" not in path.parts}


def imported_names(path: Path, name: str) -> set[str]:
    """Every dotted name an import statement anywhere in the module may load, its parent packages included."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names.union(*(ancestors(dotted) for dotted in names))


def ancestors(name: str) -> set[str]:
    """The packages enclosing a module: loaded before it, so importing from them closes no cycle."""
    parts = name.split(".")
    return {".".join(parts[:end]) for end in range(1, len(parts))}


def import_graph() -> dict[str, set[str]]:
    modules = package_modules()
    return {name: (imported_names(path, name) & modules.keys()) - {name} - ancestors(name)
            for name, path in modules.items()}


def test_the_agentrun_modules_import_one_another_without_a_cycle():
    graph = import_graph()
    assert {"agentrun.services", "agentrun.tasks", "agentrun.watchdog"} <= graph.keys()
    assert "agentrun.tasks" in graph["agentrun.services"]  # the graph sees imports: services hand runs to tasks
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as error:
        pytest.fail(f"import cycle among agentrun modules: {' -> '.join(error.args[1])}")
    assert order.index("agentrun.watchdog") < order.index("agentrun.tasks") < order.index("agentrun.services")


def test_a_cycle_is_found_through_an_import_inside_a_function(tmp_path, monkeypatch):
    """The check itself: a lazy import closing a loop is a cycle."""
    package = tmp_path / PACKAGE
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from .b import thing\n")
    (package / "b.py").write_text("def thing():\n    from . import a\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    with pytest.raises(CycleError):
        list(TopologicalSorter(import_graph()).static_order())


@pytest.mark.parametrize("module", [
    "agentrun.services", "agentrun.tasks", "agentrun.watchdog", "agentrun.webhooks", "agentrun.loop",
    "agentrun.scenarios.runner",
])
def test_a_module_imports_first_in_a_fresh_interpreter(module):
    code = f"import django; django.setup(); import {module}"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "supportagent.settings"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
