"""The documentation names only what exists: every dotted ``deepgp.…`` name in the README, docs/ and
benchmarks/ resolves to a module or attribute, and every script or module it names as `….py` is a
file of the package, the benchmarks or the repository."""

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "benchmarks").rglob("*.md"))]


def _names(pattern: str) -> list[tuple[str, str]]:
    found = {(m.group(1), p.relative_to(ROOT).as_posix()) for p in PAGES for m in re.finditer(pattern, p.read_text())}
    return sorted(found)


def _resolve(name: str):
    parts = name.split(".")
    for i in range(len(parts), 0, -1):  # the longest importable prefix, then attributes
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj


# the library's names and the harness's (deepgp_bench: resolved where it is installed)
DOTTED = _names(r"(?<![\w./-])(deepgp(?:_bench)?(?:\.[A-Za-z_]\w*)+)")


def test_pages_name_something():
    assert len(DOTTED) > 10  # the pattern still finds the pages' names


@pytest.mark.parametrize(("name", "page"), DOTTED)
def test_dotted_names_resolve(name, page):
    try:
        _resolve(name)
    except AttributeError as e:
        pytest.fail(f"{page} names {name}, which does not exist ({e})")


# where a page's `name.py` may live: pages name modules from the packages and scripts from benchmarks/
FOLDERS = [ROOT, ROOT / "src" / "deepgp", ROOT / "bench" / "src" / "deepgp_bench", ROOT / "benchmarks",
           ROOT / "benchmarks" / "uci"]


@pytest.mark.parametrize(("path", "page"), _names(r"`([\w/]+\.py)`"))
def test_named_files_exist(path, page):
    assert any((folder / path).is_file() for folder in FOLDERS), f"{page} names {path}, which does not exist"
