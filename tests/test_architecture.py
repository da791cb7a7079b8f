"""The package's layers: imports flow one way, no cycles, small modules.

The README's "Architecture" section names the rooms; these tests hold the tree to it.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "offline_scorer"

# Highest layer first: a module may import only from its own layer or the ones below it.
LAYERS = ["cli", "reports", "evals", "scorers", "pipeline", "judges", "base"]
# Top-level modules that sit above every layer: the public faces and entry points
# (``toolkit`` is the face for the repository's own benchmarks/ and tools/).
ABOVE_ALL = {
    "offline_scorer",
    "offline_scorer.__main__",
    "offline_scorer.testing",
    "offline_scorer.toolkit",
}
MAX_LINES = 500


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def layer_of(name: str) -> str | None:
    if name in ABOVE_ALL or name.startswith("offline_scorer.testing."):
        return None
    parts = name.split(".")
    if len(parts) >= 2 and parts[1] in LAYERS:
        return parts[1]
    return "base"  # offline_scorer._exceptions, _text, _files, ...


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """Every offline_scorer module a file imports, at the top or inside functions."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from package import module` imports the module (and runs the package's
            # __init__, which sits in the module's own layer).
            names = [
                f"{node.module}.{alias.name}"
                if f"{node.module}.{alias.name}" in known
                else node.module
                for alias in node.names
            ]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        found.update(name for name in names if name in known)
    return found


def import_graph() -> dict[str, set[str]]:
    known = set(modules())
    return {name: imported_modules(path, known) - {name} for name, path in modules().items()}


def test_the_readme_names_the_same_rooms_as_the_tree() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Architecture", 1)[1].split("\n## ", 1)[0]
    folders = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__")
    named = sorted(set(re.findall(r"`([a-z_]+)/`", section)) & {p.name for p in PACKAGE.rglob("*")})
    assert [f for f in folders if f not in ("templates",)] == [
        f for f in named if (PACKAGE / f).is_dir()
    ]
    for layer in LAYERS[:-1]:
        assert f"`{layer}/`" in section, layer


def test_imports_flow_downward_only() -> None:
    upward = []
    for name, targets in import_graph().items():
        source = layer_of(name)
        if source is None:
            continue
        for target in targets:
            destination = layer_of(target)
            if destination is None or LAYERS.index(destination) < LAYERS.index(source):
                upward.append(f"{name} -> {target}")
    assert not upward, "imports that flow upward:\n" + "\n".join(sorted(upward))


def test_no_import_cycle_between_modules() -> None:
    graph = import_graph()
    # A package's __init__ re-exports its own modules: an edge from a package to one of its
    # own modules is not a cycle of behaviour. An edge INTO a package's __init__ counts: a
    # module that imports its own package (to have it register something, say) closes a
    # real cycle through that __init__.
    edges = {
        name: {t for t in targets if not t.startswith(name + ".")}
        for name, targets in graph.items()
    }
    visiting: set[str] = set()
    done: set[str] = set()
    cycles: list[str] = []

    def visit(node: str, path: list[str]) -> None:
        if node in done:
            return
        if node in visiting:
            cycles.append(" -> ".join(path[path.index(node) :] + [node]))
            return
        visiting.add(node)
        for target in sorted(edges.get(node, ())):
            visit(target, path + [node])
        visiting.discard(node)
        done.add(node)

    for node in sorted(edges):
        visit(node, [])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_every_module_imports_in_a_fresh_interpreter_without_torch() -> None:
    """Every module imports (no hidden order dependency breaks it) and none pulls torch."""
    names = [n for n in modules() if n != "offline_scorer.__main__"]
    code = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'outlines'))\n"
        "assert not heavy, heavy\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


# Imports inside functions are kept for the heavy third-party libraries only: importing
# offline_scorer stays cheap without them, and everything else is visible at the top.
# (safetensors too: its torch half, ``safetensors.torch``, imports torch.)
HEAVY = {
    "torch",
    "transformers",
    "outlines",
    "outlines_core",
    "ray",
    "pyarrow",
    "gguf",
    "safetensors",
}


def function_level_imports(path: Path) -> list[str]:
    """``module:line name`` for every import inside a function that is not of a heavy library."""
    found = []
    for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or "."]
            else:
                continue
            found += [
                f"{module_name(path)}:{node.lineno} {n}"
                for n in names
                if n.split(".")[0] not in HEAVY
            ]
    return found


def test_imports_sit_at_the_top_except_heavy_libraries() -> None:
    hidden = [entry for path in modules().values() for entry in function_level_imports(path)]
    assert not hidden, "imports inside functions (move them to the top):\n" + "\n".join(hidden)


def test_the_cycle_check_sees_edges_into_a_package_init(tmp_path: Path) -> None:
    """The check above would have caught the registry's old lazy import of its package."""
    registry = PACKAGE / "scorers" / "_registry.py"
    edge = imported_modules(registry, set(modules()))
    assert "offline_scorer.scorers" not in edge  # the table imports the scorer modules
    lazy = tmp_path / "lazy.py"
    lazy.write_text("def registered():\n    import offline_scorer.scorers\n")
    assert imported_modules(lazy, set(modules())) == {"offline_scorer.scorers"}


@pytest.mark.parametrize("name", sorted(modules()))
def test_modules_stay_small(name: str) -> None:
    lines = len(modules()[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{name} has {lines} lines; split it (limit {MAX_LINES})"


def test_python_dash_m_runs_the_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "offline_scorer", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "score" in done.stdout and "demo" in done.stdout and "models" in done.stdout
