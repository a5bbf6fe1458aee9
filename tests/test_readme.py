"""Every command README.md shows is run, so the README cannot rot.

Each fenced `bash` block of README.md is preceded by a marker comment:

    <!-- readme-test: run -->                   run every command line of the block
    <!-- readme-test: run, exit 1 (why) -->     ... and each must exit with 1
    <!-- readme-test: skip (why) -->            shown, not run here (the reason says where
                                                it is tested instead, or why it cannot be)

A bash block without a marker fails the test. The marked blocks run in README order, one
command line at a time (comments and blank lines skipped), each in `bash` in one scratch
folder that starts with a copy of the stubs (`exercises/`, as a student's release has), with
this environment's `torchgrade` first on PATH, so a later block sees what an earlier one made
(the release the instructor built, the student's check results).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO
from grader.release.notebooks import exercises_root

README = REPO / "README.md"
MARKER = re.compile(r"<!--\s*readme-test:\s*(run|skip)\b(.*?)-->")
EXIT = re.compile(r"^,\s*exit\s+(\d+)")


@dataclass(frozen=True)
class Block:
    line: int                  # of the opening fence, 1-based
    action: str | None         # "run", "skip", or None (unmarked)
    exit_code: int
    commands: list[str]


def bash_blocks(text: str) -> list[Block]:
    """The fenced bash blocks of `text` with the marker just before each (blank lines between
    them allowed)."""
    lines = text.splitlines()
    blocks, marker, i = [], None, 0
    while i < len(lines):
        line = lines[i].strip()
        found = MARKER.search(line)
        if found:
            marker = found
        elif line.startswith("```"):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip().startswith("```"))
            if line == "```bash":
                code = exit_code = 0
                if marker is not None and marker.group(1) == "run":
                    code = EXIT.match(marker.group(2).strip())
                    exit_code = int(code.group(1)) if code else 0
                commands = [c.strip() for c in lines[i + 1:end]
                            if c.strip() and not c.strip().startswith("#")]
                blocks.append(Block(i + 1, marker.group(1) if marker else None, exit_code,
                                    commands))
            marker, i = None, end
        elif line:
            marker = None  # a marker belongs to the block right after it
        i += 1
    return blocks


@pytest.mark.fast
def test_every_bash_block_is_marked_run_or_skip():
    blocks = bash_blocks(README.read_text(encoding="utf-8"))
    unmarked = [b.line for b in blocks if b.action is None]
    assert unmarked == [], (
        f"README.md: the bash blocks at lines {unmarked} have no marker; put "
        "`<!-- readme-test: run -->` (or `run, exit N (why)` or `skip (why)`) on the line "
        "before each (see this file's docstring)")
    assert sum(b.action == "run" for b in blocks) >= 5


@pytest.mark.fast
def test_the_parser_reads_markers_and_exit_codes():
    text = ("<!-- readme-test: run, exit 1 (stubs) -->\n```bash\ntorchgrade check x  # c\n"
            "# only a comment\n\nls\n```\n\n```bash\nunmarked\n```\n"
            "<!-- readme-test: skip (slow) -->\n\n```bash\nslow\n```\n```python\nx = 1\n```\n")
    assert bash_blocks(text) == [Block(2, "run", 1, ["torchgrade check x  # c", "ls"]),
                                 Block(9, None, 0, ["unmarked"]),
                                 Block(14, "skip", 0, ["slow"])]


@pytest.mark.slow
def test_readme_commands_run_as_documented(tmp_path):
    blocks = [b for b in bash_blocks(README.read_text(encoding="utf-8")) if b.action == "run"]
    shutil.copytree(exercises_root(), tmp_path / "exercises",
                    ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
                                 f"{os.environ.get('PATH', '')}"}
    for block in blocks:
        for command in block.commands:
            proc = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=300)
            assert proc.returncode == block.exit_code, \
                (f"README.md line {block.line}: `{command}` exited {proc.returncode}, "
                 f"documented {block.exit_code}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    # What the documented commands promise, briefly.
    assert (tmp_path / "release" / "notebooks" / "strides_broadcasting.ipynb").is_file()
    assert "def c_strides" in (tmp_path / "strides_broadcasting_solution.py").read_text()
    assert (tmp_path / "graded" / "index.html").is_file()
    assert {p.parent.name for p in (tmp_path / "graded").glob("*/results.json")} == {"ada", "bo"}
