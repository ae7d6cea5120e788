"""The packages are layers that import downward only, and no module closes a circle.

Every import statement counts: at the top of a module, inside a function (the usual way a
circle is hidden rather than removed) and under `TYPE_CHECKING`. A package may import
itself and the packages listed before it in LAYERS, nothing after it; a new package has
to be given its place here before its first test passes.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

LAYERS = [
    "kit",  # the shared kit: imports no package of the project
    "tickets",  # tickets, customers, jobs, documents
    "tools",  # the read-only tools and their dispatch table
    "providers",  # the model adapters and what a model is shown
    "engine",  # runs: the loop, steps, settling, budgets, packets, the watchdog, tasks
    "integrations",  # help-desk intake, packet notifications
    "evaluation",  # candidate models replayed on past runs
    "staff",  # the admin, the pages, the JSON API, the dashboard
    "scenarios",  # the conformance scenarios
    "supportagent",  # the project: settings, URLs, the Celery and WSGI entry points
]


def source_packages(root: Path) -> list[str]:
    return sorted(p.parent.name for p in root.glob("*/__init__.py") if p.parent.name != "tests")


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path) -> dict[str, Path]:
    """Every module of the source (migrations aside: Django loads those, nothing imports them)."""
    return {
        module_name(root, path): path
        for package in source_packages(root)
        for path in sorted((root / package).rglob("*.py"))
        if "migrations" not in path.parts
    }


def imported_names(path: Path, name: str) -> set[str]:
    """Every dotted name an import statement anywhere in the module may load."""
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
    return names


def ancestors(name: str) -> set[str]:
    """The packages enclosing a module: loaded before it, so importing from them closes no circle."""
    parts = name.split(".")
    return {".".join(parts[:end]) for end in range(1, len(parts))}


def import_graph(root: Path) -> dict[str, set[str]]:
    found = modules(root)
    graph = {}
    for name, path in found.items():
        names = imported_names(path, name)
        names |= set().union(*(ancestors(dotted) for dotted in names))
        graph[name] = (names & found.keys()) - {name} - ancestors(name)
    return graph


def upward_imports(graph: dict[str, set[str]], layers: list[str]) -> list[str]:
    """Each import of a module from a later layer, named by the module it loads (not its packages too)."""
    rank = {package: index for index, package in enumerate(layers)}
    found = []
    for module, targets in graph.items():
        named = targets - set().union(*(ancestors(target) for target in targets))
        found += [
            f"{module} -> {target}" for target in named if rank[target.split(".")[0]] > rank[module.split(".")[0]]
        ]
    return sorted(found)


def test_every_package_has_its_layer():
    assert sorted(source_packages(ROOT)) == sorted(LAYERS)


def test_packages_import_downward_only():
    graph = import_graph(ROOT)
    assert "engine.tasks" in graph["engine.services"]  # the graph sees imports: services hand runs to tasks
    assert upward_imports(graph, LAYERS) == []


def test_no_module_closes_a_circle():
    graph = import_graph(ROOT)
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as error:
        pytest.fail(f"import circle: {' -> '.join(error.args[1])}")
    assert order.index("engine.watchdog") < order.index("engine.tasks") < order.index("engine.services")


def _house(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_an_upward_import_inside_a_function_is_found(tmp_path):
    """The check itself: the kit reaching up into the engine, hidden in a function, is an upward arrow."""
    root = _house(
        tmp_path,
        {
            "kit/__init__.py": "",
            "kit/csv.py": "def rows():\n    from engine.models import Run\n",
            "engine/__init__.py": "",
            "engine/models.py": "from kit.csv import rows\nclass Run: pass\n",
        },
    )
    assert upward_imports(import_graph(root), ["kit", "engine"]) == ["kit.csv -> engine.models"]


def test_an_upward_import_for_type_checking_is_found(tmp_path):
    root = _house(
        tmp_path,
        {
            "kit/__init__.py": "",
            "kit/csv.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from engine import models\n",
            "engine/__init__.py": "",
            "engine/models.py": "",
        },
    )
    assert upward_imports(import_graph(root), ["kit", "engine"]) == ["kit.csv -> engine.models"]


def test_a_circle_is_found_through_an_import_inside_a_function(tmp_path):
    root = _house(
        tmp_path,
        {
            "engine/__init__.py": "",
            "engine/a.py": "from .b import thing\n",
            "engine/b.py": "def thing():\n    from . import a\n",
        },
    )
    with pytest.raises(CycleError):
        list(TopologicalSorter(import_graph(root)).static_order())


@pytest.mark.parametrize(
    "module",
    [
        "engine.services",
        "engine.tasks",
        "engine.watchdog",
        "integrations.webhooks",
        "engine.loop",
        "scenarios.runner",
        "staff.admin",
        "tools.registry",
        "providers",
    ],
)
def test_a_module_imports_first_in_a_fresh_interpreter(module):
    code = f"import django; django.setup(); import {module}"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "supportagent.settings"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
