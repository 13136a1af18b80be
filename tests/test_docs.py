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
    found = {(m.group(1), p.relative_to(ROOT).as_posix())
             for p in PAGES for m in re.finditer(pattern, p.read_text(encoding="utf-8"))}
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


def _result_paths() -> list[tuple[str, str]]:
    """Every results file a page names in backticks outside its code blocks, braces expanded
    (`step_time_dtype_float{64,32}.json`); names with a wildcard or a placeholder are patterns, not files."""
    found = set()
    for page in PAGES:
        prose = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for m in re.finditer(r"`((?:[\w.-]+/)*results/[\w./{},*-]+\.jsonl?)`", prose):
            name = m.group(1)
            if "*" in name or re.search(r"[A-Z]{3,}", name):
                continue
            brace = re.search(r"\{([^}]*)\}", name)
            options = brace.group(1).split(",") if brace else [""]
            for option in options:
                found.add((name[: brace.start()] + option + name[brace.end():] if brace else name,
                           page.relative_to(ROOT).as_posix()))
    return sorted(found)


@pytest.mark.parametrize(("path", "page"), _result_paths())
def test_named_results_files_exist(path, page):
    folders = [ROOT, ROOT / "benchmarks", ROOT / "benchmarks" / "uci", (ROOT / page).parent]
    assert any((folder / path).is_file() for folder in folders), f"{page} names {path}, which does not exist"


def test_results_files_are_named_for_what_they_hold():
    """Not by the commit they ran at (a file records its commit inside): a name says what it holds."""
    hashed = [p.relative_to(ROOT).as_posix() for p in (ROOT / "benchmarks").rglob("results/**/*")
              if p.is_file() and re.search(r"(^|[_.-])[0-9a-f]{7}([_.-]|$)", p.stem)]
    assert not hashed, f"results files named by a commit hash: {hashed}"


def test_code_comments_name_no_commit():
    """Comments and docstrings say why, not which commit: a commit's hash means nothing to a reader of
    the code (and is lost with a rebase); the measurements behind a choice are on the benchmark pages."""
    files = [p for folder in ("src", "benchmarks") for p in sorted((ROOT / folder).rglob("*.py"))]
    named = [f"{p.relative_to(ROOT)}:{i}" for p in files
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"\bcommits? [0-9a-f]{7,40}\b", line)]
    assert not named, f"commit hashes in code: {named}"


@pytest.mark.slow
def test_readme_code_runs_as_written(tmp_path, monkeypatch):
    """The README's Python blocks, pasted as they are, run against the current API (at 30 iterations
    each instead of their thousands: what is checked is the code, not the fit)."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 2
    monkeypatch.chdir(tmp_path)
    for i, code in enumerate(blocks):
        code, cuts = re.subn(r"iterations=[\d_]+", "iterations=30", code)
        assert cuts == 1
        exec(compile(code, f"README.md, block {i + 1}", "exec"), {})
    assert (tmp_path / "reg.safetensors").is_file() and (tmp_path / "model.safetensors").is_file()
