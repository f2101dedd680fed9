"""The parts of wf stand on floors, and every import runs down: a package imports only
the packages on the floors below it (lazy imports inside functions included), and no
modules import each other in a circle. A newcomer reads the architecture from this list.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WF = ROOT / "wf"

# The floors, from the ground up; a part may import only parts listed before it.
FLOORS = (
    "base",  # errors, ids, files, records, settle, lock, project, config
    "tasks",  # TASKS.md engine, backlog, holds, edits, archive, views, caches
    "cost",  # transcript readers, prices, cost log
    "adapters",  # how to start each tool headless and read what it said
    "workers",  # one headless worker: supervise, processes, run folders
    "trees",  # git, worktrees, clones, merge
    "fanout",  # many units: manifests, retry, monitor, gather
    "orch",  # lanes: state, pick, post, loop, gate
    "cloud",  # the cloud lane, plugged into orch
    "night",  # batch, res, prep, pilot, demo
    "doctor",  # findings across every part
    "cli",  # click, and nothing else imports it
    "scripted",  # the scripted worker program (python -m wf.scripted)
    "__main__",
)


def _modules() -> dict[str, Path]:
    found = {}
    for p in WF.rglob("*.py"):
        parts = list(p.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = p
    return found


MODULES = _modules()


def _resolve(name: str) -> str:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _imports(path: Path) -> set[str]:
    """Every wf module the file imports, anywhere in it (lazy imports too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and node.module.startswith("wf")
        ):
            for a in node.names:
                full = f"{node.module}.{a.name}"
                found.add(full if full in MODULES else _resolve(node.module))
        elif isinstance(node, ast.Import):
            found.update(_resolve(a.name) for a in node.names if a.name.startswith("wf"))
    return found - {"wf"}


def _part(module: str) -> str:
    return module.split(".")[1] if "." in module else module


GRAPH = {m: _imports(p) - {m} for m, p in MODULES.items()}


def test_every_part_has_a_floor_and_says_what_it_may_import() -> None:
    parts = {_part(m) for m in MODULES if m != "wf"}
    assert parts <= set(FLOORS), parts - set(FLOORS)
    for part in parts:
        init = WF / part / "__init__.py"
        if init.exists():
            doc = ast.get_docstring(ast.parse(init.read_text("utf-8"))) or ""
            assert doc, f"wf/{part}/__init__.py says what it holds"


def _imported_parts(part: str) -> set[str]:
    return {_part(t) for m, ts in GRAPH.items() if m != "wf" and _part(m) == part for t in ts} - {part}


def test_each_package_says_truly_what_it_may_import() -> None:
    """Its ``May import:`` paragraph names the parts it imports (or says "every part
    below", which the floors then hold it to), and none it says it never imports."""
    for part in FLOORS:
        init = WF / part / "__init__.py"
        if not init.exists():
            continue
        doc = ast.get_docstring(ast.parse(init.read_text("utf-8"))) or ""
        said = next((p for p in doc.split("\n\n") if p.startswith("May import:")), None)
        assert said is not None, f"wf/{part}/__init__.py has no 'May import:' paragraph"
        allowed, _, never = said.partition("never")
        named = set(re.findall(r"``wf\.(\w+)``", allowed))
        imported = _imported_parts(part)
        assert not imported & set(re.findall(r"``wf\.(\w+)``", never)), (part, imported)
        if "every part below" not in allowed:
            assert imported <= named, f"wf.{part} imports {sorted(imported - named)}, its docstring says not"


def test_every_import_runs_down_a_floor() -> None:
    floor = {p: i for i, p in enumerate(FLOORS)}
    up = set()
    for m, targets in GRAPH.items():
        if m == "wf":
            continue
        for t in targets:
            a, b = _part(m), _part(t)
            if a != b and floor[b] > floor[a]:
                up.add((m, t))
    assert not up, f"imports up a floor: {sorted(up)}"


def test_no_modules_import_each_other_in_a_circle() -> None:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                circles.append(sorted(scc))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert not circles, f"modules importing each other in a circle: {circles}"


def test_config_names_exactly_the_registered_adapters() -> None:
    from wf import adapters
    from wf.base import config

    assert tuple(adapters.ADAPTERS) == config.ADAPTERS


def test_wf_list_loads_no_heavy_module(tmp_path: Path) -> None:
    """Startup is part of the product: the commands a person types most (list, show) import
    neither GitPython, filelock, psutil, tomlkit nor the adapters (each costs tens of ms)."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "TASKS.md").write_text("# Tasks\n\n## a: A task\nModel: sonnet\nDone: `true`\n")
    probe = (
        "import sys\n"
        "from wf.cli.base import main\n"
        "for argv in (['list'], ['show', 'a'], ['list', '--runner']):\n"
        "    main(argv)\n"
        "heavy = ('git', 'filelock', 'psutil', 'tomlkit', 'wf.adapters', 'wf.trees', 'wf.workers')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m in heavy\n"
        "             or '.'.join(m.split('.')[:2]) in heavy))\n"
    )
    r = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]", r.stdout


def test_commands_that_run_no_git_never_import_gitpython(tmp_path: Path) -> None:
    """GitPython (~50 ms and a `git version` process) is imported by gitops on first use:
    the everyday commands that run no git never load it."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "TASKS.md").write_text("# Tasks\n\n## a: A task\nModel: sonnet\nDone: `true`\n")
    probe = (
        "import sys\n"
        "from wf.cli.base import main\n"
        "for argv in (['ctx', 'a'], ['add', 'B', '--id', 'b', '--model', 'sonnet', '--done', 'true'],\n"
        "             ['status', 'a', 'progress', 'me'], ['check'], ['done', 'b'], ['list'], ['show', 'a']):\n"
        "    main(argv)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('git', 'gitdb')))\n"
    )
    r = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]", r.stdout


def test_each_package_names_its_modules() -> None:
    """A newcomer reads a part's ``__init__`` and learns every module it holds: each one
    is named there (as ``name``)."""
    unnamed = []
    for init in sorted(WF.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text("utf-8"))) or ""
        for module in sorted(init.parent.glob("*.py")):
            if module.name != "__init__.py" and f"``{module.stem}``" not in doc:
                unnamed.append(f"{init.parent.name}/{module.name}")
    assert unnamed == []


MAX_FUNCTION_LINES = 80


def test_no_function_is_longer_than_eighty_lines() -> None:
    """From its ``def`` line to its last (decorators not counted), nested ones too."""
    long = []
    for path in sorted(WF.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({size} lines)")
    assert long == []
