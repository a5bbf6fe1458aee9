"""The repository as the design card draws it: its top level, the engine knowing no exercise of
the shipped course, no file left half-merged. Fast: reads the tracked files only."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from conftest import REPO
from grader.course.folder import default_course

pytestmark = pytest.mark.fast

# The design card's top level, the shipped course's other folders and files beside it (the
# repository's root is that course), and what builds, proves and explains the rest.
CARD = {"exercises", "solutions", "grader", "tests", "templates", "pyproject.toml", "README.md"}
COURSE = {"course.toml", "faults.toml", "checks", "probes", "mutants", "samples",
          "CURRICULUM.md"}
AROUND = {"docs", "benchmarks", "scripts", "DEVELOPERS.md", "constraints.txt", ".ci",
          ".gitignore"}


@pytest.fixture(scope="module")
def tracked() -> list[str]:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True)
    return [p for p in out.stdout.decode("utf-8").split("\0") if p]


def test_the_top_level_is_the_design_cards(tracked):
    top = {p.split("/")[0] for p in tracked}
    assert CARD <= top, f"missing at the top: {sorted(CARD - top)}"
    stray = top - CARD - COURSE - AROUND
    assert not stray, f"not on the design card, nor the course's, nor a known helper: {stray}"


def test_no_tracked_file_is_left_half_merged(tracked):
    marker = re.compile(r"^(<{7}|>{7}) ", re.M)
    found = []
    for rel in tracked:
        try:
            text = (REPO / rel).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if marker.search(text):
            found.append(rel)
    assert not found, f"merge-conflict markers in {found}"


def test_no_module_of_the_engine_names_an_exercise_of_the_shipped_course(tracked):
    """The engine holds mechanisms; the shipped course's knowledge is the course's. Its
    exercises are named nowhere in grader/, not even in an example (a bug hunt by its id or
    its file, `bughunt/<name>.py`). `parameters` is also a word of English and of torch
    (`model.parameters()`), so it is looked for where it names the exercise."""
    course = default_course()
    names = [e for e in course.exercises if e != "parameters"]
    names += [course.student_file(e).removesuffix(".py") for e in course.exercises
              if "/" in course.student_file(e)]
    word = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, names)) + r")(?![A-Za-z0-9_])"
                      r"|[\"']parameters[\"':]|parameters_(cases|verify|reference)"
                      r"|probes[./]parameters\b")
    found = [f"{rel}: {m.group(0)}" for rel in tracked
             if rel.startswith("grader/") and rel.endswith((".py", ".toml", ".ini", ".j2"))
             for m in [word.search((REPO / rel).read_text(encoding="utf-8"))] if m]
    assert not found, found
    assert Path(REPO / "grader").is_dir()
