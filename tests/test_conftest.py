"""The test suite's own set-up (tests/conftest.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_a_module_that_fails_to_import_is_a_collection_error_under_xdist(tmp_path: Path) -> None:
    """With workers, the controller imports the test modules beforehand (to cache their
    rewritten asserts): a module that fails to import, or skips itself at import, must
    stay one module's collection error or skip, not an INTERNALERROR that runs nothing."""
    tests = tmp_path / "tests"
    tests.mkdir()
    for name in ("conftest.py", "wfproc.py", "zygote.py"):  # conftest imports the other two
        shutil.copy(Path(__file__).with_name(name), tests / name)
    (tests / "__init__.py").write_text("")
    (tests / "test_broken.py").write_text("import no_such_module_anywhere\n")
    (tests / "test_skipped.py").write_text(
        "import pytest\n\npytest.importorskip('no_such_module_anywhere')\n"
    )
    (tests / "test_fine.py").write_text("def test_fine() -> None:\n    assert 1 + 1 == 2\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    r = subprocess.run(
        # its own basetemp: in the default one, pytest deletes the oldest numbered
        # folders of earlier runs (thousands of test repositories: tens of seconds)
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "1",
            "-p",
            "no:cacheprovider",
            f"--basetemp={tmp_path / 'bt'}",
            "tests",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "INTERNALERROR" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert "ERROR tests/test_broken.py" in r.stdout, r.stdout
    assert "1 passed" in r.stdout and "1 skipped" in r.stdout, r.stdout
