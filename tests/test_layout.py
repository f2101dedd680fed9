"""The arrows between wf's parts go down only: the ground imports nothing above it, and
the four arrows that once went up (doctor to orch, config to taskfile, procs to usage,
costlog and the CLI to a private printer of views) stay gone."""

from __future__ import annotations

import ast
from pathlib import Path

WF = Path(__file__).resolve().parent.parent / "wf"
GROUND = {"errors", "fsutil", "ids", "homes", "text", "project", "lock", "config"}


def _imports(path: Path) -> set[str]:
    """Every wf module (and imported name, as module.name) the file imports, anywhere."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("wf"):
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("wf"))
    return found


def test_the_ground_imports_only_the_ground() -> None:
    for name in sorted(GROUND):
        up = {m for m in _imports(WF / f"{name}.py") if m.count(".") == 1 and m.split(".")[1] not in GROUND}
        assert up <= {f"wf.{g}" for g in GROUND} | {"wf.__version__"}, (name, up)


def test_the_four_arrows_that_went_up_stay_gone() -> None:
    assert not {m for m in _imports(WF / "doctor.py") if m.startswith("wf.orch")}
    assert not {m for m in _imports(WF / "config.py") if m.startswith("wf.taskfile")}
    assert not {m for m in _imports(WF / "procs.py") if m.startswith("wf.usage")}
    private = [
        str(p.relative_to(WF))
        for p in WF.rglob("*.py")
        if p.name != "views.py" and any(m.startswith("wf.views._") for m in _imports(p))
    ]
    assert private == []


def test_config_names_exactly_the_registered_adapters() -> None:
    from wf import adapters, config

    assert tuple(adapters.ADAPTERS) == config.ADAPTERS


def test_wf_list_loads_no_heavy_module(tmp_path: Path) -> None:
    """Startup is part of the product: the commands a person types most (list, show) import
    neither GitPython, psutil, tomlkit nor the adapters (each costs tens of ms). wf check
    may: it checks each lane's model against its tool."""
    import subprocess
    import sys

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "TASKS.md").write_text("# Tasks\n\n## a: A task\nModel: sonnet\nDone: `true`\n")
    probe = (
        "import sys\n"
        "from wf.cli.base import main\n"
        "for argv in (['list'], ['show', 'a'], ['list', '--runner']):\n"
        "    main(argv)\n"
        "heavy = ('git', 'psutil', 'tomlkit', 'wf.adapters', 'wf.gitops', 'wf.procs')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m in heavy))\n"
    )
    r = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]", r.stdout
