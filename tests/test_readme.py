"""Every command README.md and the pages under docs/ show is run, so none of them can rot.

Each fenced `bash` block of README.md and of every page under docs/ is preceded by a marker
comment:

    <!-- readme-test: run -->                   run every command line of the block
    <!-- readme-test: run, exit 1 (why) -->     ... and each must exit with 1
    <!-- readme-test: skip (why) -->            shown, not run here (the reason says where
                                                it is tested instead, or why it cannot be)
    <!-- readme-test: skip (run in docs/students.md) -->
                                                a repeat of commands that page runs: each of
                                                its command lines must be one of that page's
                                                `run` lines, so the two cannot drift apart

A bash block without a marker fails the test. Each page's marked blocks run in the page's order,
one command line at a time (comments and blank lines skipped), each in `bash` in a scratch
folder of the page's own, with this environment's `torchgrade` first on PATH, so a later block
of a page sees what an earlier one made (the release the instructor built, the student's check
results). The scratch folder starts with a copy of the stubs where every page's reader has them,
`exercises/`: a student's release has them there, a self-learner's clone of this repository
too, and the instructor's page builds its release from there. The pages run
apart, so each must make what it uses, as its reader would: a page that relies on another's
commands does not pass. Pages run: README.md, then PAGES in that order, then any other page
under docs/ (a new page is covered as soon as it exists).

Links between these pages (`[x](instructors.md#assignments)`, `[x](#isolation-levels)`) must
reach a file and one of its headings.
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
DOCS = REPO / "docs"
PAGES = ["README.md", "docs/students.md", "docs/self-learners.md", "docs/instructors.md",
         "docs/operations.md", "docs/AUTHORING.md"]
# Pages linked to before they exist (none now).
PENDING: set[str] = set()
MARKER = re.compile(r"<!--\s*readme-test:\s*(run|skip)\b(.*?)-->")
EXIT = re.compile(r"^,\s*exit\s+(\d+)")
RUN_IN = re.compile(r"^\(run in (\S+\.md)\)$")


def all_pages() -> list[str]:
    others = sorted(p.relative_to(REPO).as_posix() for p in DOCS.rglob("*.md"))
    return PAGES + [p for p in others if p not in PAGES]


@dataclass(frozen=True)
class Block:
    line: int                  # of the opening fence, 1-based
    action: str | None         # "run", "skip", or None (unmarked)
    exit_code: int
    commands: list[str]
    reason: str = ""           # the marker's text after run/skip


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
                commands = commands_of(lines[i + 1:end])
                blocks.append(Block(i + 1, marker.group(1) if marker else None, exit_code,
                                    commands, marker.group(2).strip() if marker else ""))
            marker, i = None, end
        elif line:
            marker = None  # a marker belongs to the block right after it
        i += 1
    return blocks


HEREDOC = re.compile(r"<<-?\s*'?\"?(\w+)'?\"?\s*$")


def commands_of(lines: list[str]) -> list[str]:
    """A block's command lines (comments and blank lines skipped); a line that opens a here
    document (`cat > f <<'EOF'`) is one command with every line up to its terminator, as
    written (a file's own `#` lines and indentation included)."""
    commands, i = [], 0
    while i < len(lines):
        line = lines[i].strip()
        opened = HEREDOC.search(line)
        if opened:
            end = next(j for j in range(i + 1, len(lines))
                       if lines[j].strip() == opened.group(1))
            commands.append("\n".join([line, *lines[i + 1:end + 1]]))
            i = end + 1
            continue
        if line and not line.startswith("#"):
            commands.append(line)
        i += 1
    return commands


def page_blocks(page: str) -> list[Block]:
    return bash_blocks((REPO / page).read_text(encoding="utf-8"))


def bare(command: str) -> str:
    """A command line without its trailing comment and spacing."""
    return re.sub(r"\s+#.*$", "", command).strip()


@pytest.mark.fast
@pytest.mark.parametrize("page", all_pages())
def test_every_bash_block_is_marked_run_or_skip(page):
    unmarked = [b.line for b in page_blocks(page) if b.action is None]
    assert unmarked == [], (
        f"{page}: the bash blocks at lines {unmarked} have no marker; put "
        "`<!-- readme-test: run -->` (or `run, exit N (why)` or `skip (why)`) on the line "
        "before each (see tests/test_readme.py's docstring)")


@pytest.mark.fast
def test_the_pages_run_commands():
    assert sum(b.action == "run" for p in all_pages() for b in page_blocks(p)) >= 5


@pytest.mark.fast
@pytest.mark.parametrize("page", all_pages())
def test_a_repeat_is_run_where_it_says(page):
    for block in page_blocks(page):
        where = RUN_IN.match(block.reason) if block.action == "skip" else None
        if where is None:
            continue
        there = where.group(1)
        assert (REPO / there).is_file(), f"{page} line {block.line}: no page {there}"
        runs = {bare(c) for b in page_blocks(there) if b.action == "run" for c in b.commands}
        missing = [c for c in block.commands if bare(c) not in runs]
        assert missing == [], (f"{page} line {block.line}: {missing} are not run in {there}; "
                               "show them as that page runs them, or mark the block `run`")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading's text."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text, fence, found = path.read_text(encoding="utf-8"), False, set()
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and re.match(r"^#{1,6} ", line):
            found.add(slug(line.lstrip("#")))
    return found


@pytest.mark.fast
@pytest.mark.parametrize("page", all_pages() + ["DEVELOPERS.md"])
def test_links_between_pages_reach_a_heading(page):
    path = REPO / page
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    broken = []
    for target, anchor in re.findall(r"\]\(([^)#:\s]*)(?:#([^)\s]*))?\)", text):
        if target and not target.endswith(".md"):
            continue  # a picture, a folder: not a page
        dest = (path.parent / target).resolve() if target else path
        name = dest.relative_to(REPO).as_posix() if dest.is_relative_to(REPO) else str(dest)
        if not dest.is_file():
            if name not in PENDING:
                broken.append(f"{target}: no such file")
            continue
        if anchor and anchor not in anchors(dest):
            broken.append(f"{target}#{anchor}: no such heading in {name}")
    assert broken == [], f"{page}: {broken}"


@pytest.mark.fast
def test_students_get_one_install_command():
    """The repository's student path (README.md, docs/students.md) and the README a release
    ships (grader/release/build.py) give students the same set-up lines."""
    from grader.release.build import student_readme

    def install(text: str) -> list[str]:
        found = [b.commands for b in bash_blocks(text)  # the block that starts a venv alone
                 if b.commands and bare(b.commands[0]) == "python3 -m venv .venv"]
        assert len(found) == 1, found
        return [bare(c) for c in found[0]]

    released = install(student_readme(["strides_broadcasting"]))
    assert install(README.read_text(encoding="utf-8")) == released
    assert install((DOCS / "students.md").read_text(encoding="utf-8")) == released


@pytest.mark.fast
def test_the_parser_reads_markers_and_exit_codes():
    text = ("<!-- readme-test: run, exit 1 (stubs) -->\n```bash\ntorchgrade check x  # c\n"
            "# only a comment\n\nls\n```\n\n```bash\nunmarked\n```\n"
            "<!-- readme-test: skip (slow) -->\n\n```bash\nslow\n```\n```python\nx = 1\n```\n")
    assert bash_blocks(text) == [Block(2, "run", 1, ["torchgrade check x  # c", "ls"],
                                       ", exit 1 (stubs)"),
                                 Block(9, None, 0, ["unmarked"]),
                                 Block(14, "skip", 0, ["slow"], "(slow)")]
    # A here document is one command, its lines as written (`#` and indentation are the file's).
    text = "```bash\ncat > f <<'EOF'\n# must fail: x\n    y = 1\nEOF\nls\n```\n"
    assert bash_blocks(text)[0].commands == ["cat > f <<'EOF'\n# must fail: x\n    y = 1\nEOF",
                                             "ls"]
    assert slug(" Job arrays: `--shard K/N` and `torchgrade index`") == \
        "job-arrays---shard-kn-and-torchgrade-index"


# What each page's commands promise, briefly (paths in its scratch folder).
PROMISES = {
    "docs/students.md": ["torchgrade-check/strides_broadcasting/report.html",
                         "torchgrade-check/bughunt_regression/report.html"],
    "docs/self-learners.md": ["strides_broadcasting_solution.py"],
    "docs/AUTHORING.md": ["stepcourse/course.toml", "torchgrade-check/train_step/report.html"],
    "docs/instructors.md": ["release/notebooks/strides_broadcasting.ipynb", "graded/index.html",
                            "graded/ada/results.json", "graded/bo/results.json"],
}


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in all_pages()
                                  if any(b.action == "run" for b in page_blocks(p))])
def test_page_commands_run_as_documented(page, tmp_path):
    blocks = [b for b in page_blocks(page) if b.action == "run"]
    shutil.copytree(exercises_root(), tmp_path / "exercises",
                    ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
                                 f"{os.environ.get('PATH', '')}"}
    for block in blocks:
        for command in block.commands:
            proc = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=300)
            assert proc.returncode == block.exit_code, \
                (f"{page} line {block.line}: `{command}` exited {proc.returncode}, "
                 f"documented {block.exit_code}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    for made in PROMISES.get(page, []):
        assert (tmp_path / made).is_file(), f"{page}: its commands did not make {made}"
    if page == "docs/self-learners.md":
        assert "def c_strides" in (tmp_path / "strides_broadcasting_solution.py").read_text()
    if page == "docs/instructors.md":
        assert {p.parent.name for p in (tmp_path / "graded").glob("*/results.json")} == \
            {"ada", "bo"}
