"""What the forking test server (tests/zygote.py) cannot show, shown without it.

The server imports every wf module before any command runs, and most tests call
``main()`` in a process that has imported much of wf already: a lazy import (inside a
function) that names a module or a name that is not there, or that works only because
another module was imported first, never fails there. Here each part of wf is imported in
a fresh interpreter, and every import statement anywhere in its source (lazy ones and
``TYPE_CHECKING`` ones included) is resolved; and a few commands whose code paths import
lazily run as real ``python -m wf`` processes. See docs/testing.md.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WF = ROOT / "wf"
# One interpreter per part (a package, or the top-level modules): no circle can make an
# import's success hang on the order (tests/test_layout.py holds there is none).
PARTS = [*sorted(p.name for p in WF.iterdir() if (p / "__init__.py").exists()), "(top)"]


def _files(part: str) -> list[Path]:
    return sorted(WF.glob("*.py")) if part == "(top)" else sorted((WF / part).rglob("*.py"))


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _wf_imports(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, name or None) of every import of wf in the file, wherever it is."""
    out: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("wf"):
            out.extend((node.lineno, str(node.module), a.name) for a in node.names)
        elif isinstance(node, ast.Import):
            out.extend((node.lineno, a.name, None) for a in node.names if a.name.split(".")[0] == "wf")
    return out


def probe(part: str) -> list[str]:
    """In this (fresh) interpreter: import the part's modules, then resolve every wf import
    in their source. What does not resolve, one line each."""
    early = sorted(m for m in sys.modules if m.split(".")[0] == "wf")
    assert not early, f"not a fresh interpreter: {early} imported before the probe"
    problems: list[str] = []
    files = _files(part)
    for path in files:
        if path.name != "__main__.py":  # running it is the command itself
            try:
                importlib.import_module(_name(path))
            except Exception as e:
                problems.append(f"{_name(path)}: import fails: {type(e).__name__}: {e}")
    for path in files:
        for line, module, name in _wf_imports(path):
            where = f"{path.relative_to(ROOT)}:{line}"
            try:
                mod = importlib.import_module(module)
            except Exception as e:
                problems.append(f"{where}: {module}: {type(e).__name__}: {e}")
                continue
            if name is not None and not hasattr(mod, name):
                try:
                    importlib.import_module(f"{module}.{name}")
                except ImportError:
                    problems.append(f"{where}: {module} has no {name}")
    return problems


@pytest.mark.parametrize("part", PARTS)
def test_every_module_imports_and_every_import_in_it_resolves_in_a_fresh_interpreter(part: str) -> None:
    code = f"import json\nfrom tests.test_imports import probe\nprint(json.dumps(probe({part!r})))"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.splitlines()[-1]) == []


def test_the_probe_finds_a_lazy_import_of_a_name_that_is_gone(tmp_path: Path) -> None:
    """The probe itself: a function-level import of a name its module no longer has."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f() -> None:\n    from wf.cost.usage import for_session\n    from wf import nosuch\n")
    found = [(m, n) for _, m, n in _wf_imports(bad)]
    assert found == [("wf.cost.usage", "for_session"), ("wf", "nosuch")]


def _wf(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A real ``python -m wf``: an interpreter of its own, not forked from the server."""
    return subprocess.run(
        [sys.executable, "-m", "wf", *args], cwd=root, capture_output=True, text=True, timeout=120
    )


def test_commands_that_import_lazily_run_as_real_processes(repo: Path) -> None:
    """wf doctor, wf lanes (the cloud lane's row), wf orch pick (the cloud plug, the
    worktrees), wf orch post (the merge, the gate, the cost) and wf merge, each started
    as ``python -m wf`` with nothing imported before it."""
    from tests.conftest import git

    cmd = json.dumps([sys.executable, "-m", "wf.scripted"])
    (repo / "wf.toml").write_text(
        f'cloud = true\n[lanes.opus]\nmodel = "mopus"\nadapter = "cmd"\ncmd = {cmd}\n'
    )
    tasks = "".join(f"\n## {t}: Task {t}\nModel: mopus\nDone: true\n" for t in ("a1", "a2"))
    (repo / "TASKS.md").write_text("# Tasks\n" + tasks)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "setup")
    runs = {"lanes": _wf(repo, "lanes"), "pick": _wf(repo, "orch", "pick", "opus")}
    assert runs["pick"].returncode == 0 and "Task: a1" in runs["pick"].stdout, runs["pick"].stderr
    tree = repo / ".worktrees" / "opus"
    (tree / "a1.txt").write_text("a1\n")
    git(tree, "add", "a1.txt")
    git(tree, "commit", "-qm", "a1")
    sha = git(tree, "rev-parse", "HEAD").strip()
    runs["post"] = _wf(repo, "orch", "post", "opus", "--result", "done", "--commit", sha, "--no-pick")
    git(repo, "checkout", "-qb", "opus/a2")
    (repo / "a2.txt").write_text("a2\n")
    git(repo, "add", "a2.txt")
    git(repo, "commit", "-qm", "a2")
    git(repo, "checkout", "-q", "-")
    runs["merge"] = _wf(repo, "merge", "opus/a2")
    runs["doctor"] = _wf(repo, "doctor")
    for what, r in runs.items():
        assert "Traceback" not in r.stderr and r.returncode != 3, f"wf {what}: {r.stderr}"
    assert "cloud" in runs["lanes"].stdout, runs["lanes"].stdout
    assert runs["post"].returncode == 0 and "a1: done" in runs["post"].stdout, runs["post"].stderr
    assert runs["merge"].returncode == 0, runs["merge"].stderr
    assert (repo / "a1.txt").exists() and (repo / "a2.txt").exists()
