"""The lint CI runs (`.ci/run`), in the test suite too: ruff and mypy as pyproject.toml configures
them. Needs no sandbox; seconds once mypy's cache is warm. Skipped when a tool is not installed
(the `test` extra installs both)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO


def tool(name: str) -> str:
    """The `name` executable next to this Python (the venv's), else on PATH; skips without it."""
    beside = Path(sys.executable).with_name(name)
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[test]')")
    return found


def run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900)


def test_ruff_finds_nothing():
    proc = run(tool("ruff"), "check", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_finds_nothing():
    proc = run(tool("mypy"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
