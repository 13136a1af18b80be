"""The import graph: the library never imports the paper's harness (bench/: deepgp_bench), neither package has
an import circle, the command line is imported by the command line only, and the harness uses deepgp's public
names only. Read from the source with ``ast`` (every import, in functions too; not those under
``if TYPE_CHECKING:``), so that the rules hold of the code, not of one run of it."""

import ast
import graphlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"deepgp": ROOT / "src" / "deepgp", "deepgp_bench": ROOT / "bench" / "src" / "deepgp_bench"}
# the modules that make up each command line: what nothing below them may import
COMMAND_LINE = {"deepgp.__main__", "deepgp.cli", "deepgp.commands", "deepgp.arguments",
                "deepgp_bench.__main__", "deepgp_bench.cli", "deepgp_bench.peers.run"}


def _modules() -> dict[str, Path]:
    """Every module of both packages by dotted name (a package by its own name: its __init__)."""
    out = {}
    for name, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = [name, *path.relative_to(folder).with_suffix("").parts]
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


def _runtime_imports(tree: ast.Module):
    """The Import and ImportFrom nodes of ``tree`` but those under ``if TYPE_CHECKING:``."""
    def visit(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child
            yield from visit(child)

    return list(visit(tree))


def _imports(module: str) -> dict[str, set[str]]:
    """{module of either package that ``module`` imports: the names it takes from it} ("" for a whole module)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: dict[str, set[str]] = {}
    for node in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    found.setdefault(alias.name, set()).add("")
            continue
        base = node.module or ""
        if node.level:
            base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            if submodule in MODULES:  # `from . import storage`: the module storage
                found.setdefault(submodule, set()).add("")
            elif base in MODULES:
                found.setdefault(base, set()).add(alias.name)
    return found


GRAPH = {module: _imports(module) for module in MODULES}


def test_the_graph_is_read():
    assert {"deepgp.cli", "deepgp.estimator", "deepgp_bench.runner", "deepgp_bench.baselines.sghmc"} <= set(GRAPH)
    assert "deepgp.model_file" in GRAPH["deepgp.model"] and "deepgp.storage" in GRAPH["deepgp.model_file"]
    assert "deepgp_bench.runner" in GRAPH["deepgp_bench.report"]


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_import_circle(package):
    graph = {m: {i for i in imports if i != m} for m, imports in GRAPH.items() if m.split(".")[0] == package}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as err:
        pytest.fail(f"an import circle in {package}: {' -> '.join(err.args[1])}")


def test_the_library_never_imports_the_harness():
    wrong = {m: sorted(i for i in imports if i.startswith("deepgp_bench"))
             for m, imports in GRAPH.items() if m.startswith("deepgp.") or m == "deepgp"}
    assert not {m: i for m, i in wrong.items() if i}


def test_only_the_command_line_imports_the_command_line():
    wrong = {m: sorted(set(imports) & COMMAND_LINE) for m, imports in GRAPH.items() if m not in COMMAND_LINE}
    assert not {m: i for m, i in wrong.items() if i}


# modules without a leading underscore that docs/index.md ("What is public") names as internals
INTERNAL = {"deepgp.capture", "deepgp.reference"}


def test_the_harness_uses_public_names_of_deepgp_only():
    """No private module or name of deepgp (``_x``, or an internal module), imported or reached as an
    attribute of one imported."""
    wrong = []
    for module, path in MODULES.items():
        if not module.startswith("deepgp_bench"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = set()
        for target, names in _imports(module).items():
            if target.split(".")[0] != "deepgp":
                continue
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            internal = target in INTERNAL or any(f"{target}.{n}" in INTERNAL for n in names)
            if any(part.startswith("_") for part in target.split(".")) or private or internal:
                wrong.append(f"{module}: {target} {private}")
        for node in _runtime_imports(tree):  # the local names bound to deepgp's modules and objects
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "deepgp" and not node.level:
                imported |= {alias.asname or alias.name for alias in node.names}
            elif isinstance(node, ast.Import):
                imported |= {alias.asname or alias.name.split(".")[0] for alias in node.names
                             if alias.name.split(".")[0] == "deepgp"}
        for node in ast.walk(tree):  # `DeepGP._data`, `cli._run`
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in imported
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                wrong.append(f"{module}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not wrong


def test_import_deepgp_imports_no_harness():
    """Nor does importing any module of the library (the command line loads the harness only to run one of its
    commands: bench/tests/test_bench_cli.py)."""
    library = sorted(m for m in MODULES if m.split(".")[0] == "deepgp" and not m.endswith("__main__"))
    code = (f"import importlib, sys\nfor m in {library!r}: importlib.import_module(m)\n"
            "print(sorted(m for m in sys.modules if m.startswith('deepgp_bench')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
