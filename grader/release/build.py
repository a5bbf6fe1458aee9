"""`torchgrade release --out DIR`: what a student receives, and nothing that gives answers away.

The release is a folder that is itself an installable project (`pip install DIR`, which gives
the `torchgrade` command) and runs as-is from its root (`python -m grader check ...`):

    README.md            how to set up, check, work in the notebooks and hand in
    pyproject.toml       the `torchgrade-student` distribution: the grader package below
    constraints.txt      the torch version the recorded reference values were computed with
    exercises/           the stubs to fill in (bug hunts keep their subfolder)
    notebooks/           one notebook per exercise module (grader/release/notebooks.py)
    grader/              the grader without anything grader-only:
      curriculum/        the released course, the release's default course (course.toml, the
                         stubs, faults.toml cut down for students), with in checks/ the visible
                         checks, the helper modules they import, and
                         recorded/<name>_reference.json instead of each reference module
      student_release.json   the hidden checks' titles, points and targets; build facts

Left out: the reference solutions, the hidden checks (and helper modules only they import,
among them every `*_hidden.py` helper),
the grader-side reference implementations (`checks/*_reference.py`, replaced by the
values the visible checks need, recorded from a run of the visible checks on the solutions:
see `grader/release/replay.py`), the sample submissions, the mutants, the tests, and
of the fault catalogue everything but the student-facing text of the faults visible checks
detect (no links to hidden checks, no bug-hunt injections: they hold the fixes). The release is
then scanned (`grader/release/leaks.py`) for solution code, reference code and hidden checks; a leak
fails the build.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata, resources
from pathlib import Path

import grader
from grader.course.bughunt import is_bughunt
from grader.checking.edition import RELEASE_FILE, StudentRelease, student_release
from grader.checking.recorded import RECORDED_DIR, SUFFIX, versions
from grader.course.folder import COURSE_FILE, ENV, PROBES_DIR, Course, active_course
from grader.course.knowledge import DIAGNOSES
from grader.course.registry import check_files, exercise_of, known_exercises, visibility_of_file
from grader.release.leaks import NOT_SHIPPED
from grader.checking.selection import PendingCheck, collect_checks, counts_before_grading

GRADER_DIR = Path(grader.__file__).resolve().parent
RELEASED_COURSE = "curriculum"  # the release's grader/curriculum: its default course
DISTRIBUTION = "torchgrade-student"


class ReleaseError(Exception):
    """The release cannot be built as asked; the message says why."""


@dataclass
class Release:
    out: Path
    exercises: list[str]
    files: list[str] = field(default_factory=list)
    recorded: dict[str, int] = field(default_factory=dict)
    hidden: int = 0
    secrets: int = 0
    allowed: list[str] = field(default_factory=list)  # shipped on purpose, with the reason


def build_release(out: Path, *, exercises: list[str] | None = None,
                  force: bool = False) -> Release:
    """Build the student release of `exercises` (default: all) of the active course into `out`,
    then scan it. Raises ReleaseError if `out` is not empty (unless `force`) or the scan finds a
    leak."""
    if student_release() is not None:
        raise ReleaseError("this torchgrade is itself a student release: build releases from "
                           "the full package")
    exercises = list(exercises or known_exercises())
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        if not force:
            raise ReleaseError(f"{out} is not empty (use --force to replace it)")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        return _build(out, exercises)
    except BaseException:
        # A refused or failed build leaves nothing half-made behind (OUT was empty or new).
        shutil.rmtree(out, ignore_errors=True)
        raise


def _build(out: Path, exercises: list[str]) -> Release:
    release = Release(out=out, exercises=exercises)

    course = active_course()
    _copy_grader(out / "grader")
    released = out / "grader" / RELEASED_COURSE
    visible = [f for f in check_files(exercises) if visibility_of_file(f) == "visible"]
    helpers = check_helpers(visible, course.checks_dir)
    _refuse_unshipped_reach(visible, helpers, course.checks_dir)
    _copy_checks(released / "checks", visible, helpers, course.checks_dir)
    _placeholder_checks(released / "checks", exercises, visible)
    _copy_course_probes(course, released / PROBES_DIR)
    _prune_probes([out / "grader" / "probes", released / PROBES_DIR], released / "checks")
    release.recorded = _record(released / "checks" / RECORDED_DIR, exercises,
                               {h for h in helpers if h.endswith(SUFFIX)}, course)
    checks = collect_checks(exercises)
    hidden = public_hidden([c for c in checks if c.info.visibility == "hidden"])
    release.hidden = len(hidden)
    _write_catalogue(released, {c.id for c in checks if c.info.visibility == "visible"})
    _write_course_file(released, course, exercises)
    _copy_stubs(released / "exercises", exercises)
    info = StudentRelease(version=grader.__version__, built_at=datetime.now(timezone.utc),
                          exercises=exercises, hidden=hidden, recorded_with=versions())
    (out / "grader" / RELEASE_FILE.name).write_text(info.model_dump_json(indent=2) + "\n",
                                                    encoding="utf-8")
    _copy_stubs(out / "exercises", exercises)
    from grader.release.notebooks import write_notebooks

    write_notebooks(out / "notebooks", exercises)
    _write_project(out, exercises)
    release.files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    _scan(release)
    return release


# --------------------------------------------------------------------------- the grader package


def public_hidden(hidden: list) -> list[PendingCheck]:
    """What a release says about hidden checks: title, points and targets, except that a bug
    hunt's hidden checks go untitled. Each of them watches for one fault the script may hold, so
    their titles together would be the list of what to look for; the student learns only how
    many there are and what they are worth."""
    out: list[PendingCheck] = []
    count: dict[str, int] = {}
    seen: dict[str, int] = {}
    for c in hidden:
        count[c.exercise] = count.get(c.exercise, 0) + 1
    for c in hidden:
        title = c.info.title
        if is_bughunt(c.exercise):
            seen[c.exercise] = seen.get(c.exercise, 0) + 1
            title = (f"hidden check {seen[c.exercise]} of {count[c.exercise]} of the bug hunt "
                     "(what it looks for is part of the hunt)")
        out.append(PendingCheck(exercise=c.exercise, title=title, points=c.info.points,
                                targets=c.info.targets,
                                counted=counts_before_grading(c.exercise, c.id.split(".", 1)[1])))
    return out


def _copy_grader(target: Path) -> None:
    def ignore(folder: str, names: list[str]) -> list[str]:
        top = Path(folder).resolve() == GRADER_DIR
        return [n for n in names if (top and n in NOT_SHIPPED) or n == "__pycache__"
                or n.endswith((".pyc", ".pyo")) or (top and n == RELEASE_FILE.name)]

    shutil.copytree(GRADER_DIR, target, ignore=ignore)
    templates = Path(str(resources.files("grader.templates")))
    shutil.copytree(templates, target / "templates",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def check_helpers(files: list[Path], checks_dir: Path) -> set[str]:
    """The helper modules of `checks_dir` that `files` import, directly or through each other.
    Raises ReleaseError if they reach a check file or a `*_hidden` helper (hidden checks' own
    inputs and verifiers: `checks/README.md`)."""
    seen: set[str] = set()
    todo = list(files)
    while todo:
        path = todo.pop()
        for name in _imported_top_level(path):
            module = checks_dir / f"{name}.py"
            if name in seen or not module.is_file():
                continue
            if name.startswith("test_"):
                raise ReleaseError(f"{path.name} imports the check file {name}.py: visible "
                                   "checks must not depend on other check files (move what "
                                   "they share into a helper module)")
            if visibility_of_file(module) == "hidden":
                raise ReleaseError(f"{path.name} imports {name}.py, which only hidden checks "
                                   "may use (it never ships): move what the visible checks "
                                   "need into a module without the _hidden suffix")
            seen.add(name)
            todo.append(module)
    return seen


def _refuse_unshipped_reach(visible: list[Path], helpers: set[str], checks_dir: Path) -> None:
    """ReleaseError if a file that ships with the visible checks reaches a solution or a hidden
    helper (`grader.release.reach`): the reference modules do not ship (their recorded values
    do), so they may."""
    from grader.release.reach import UnshippedReach, refuse_unshipped_reach

    shipped = [*visible, *(checks_dir / f"{name}.py" for name in sorted(helpers)
                           if not name.endswith(SUFFIX))]
    if (checks_dir / "conftest.py").is_file():
        shipped.append(checks_dir / "conftest.py")
    try:
        refuse_unshipped_reach(shipped, checks_dir)
    except UnshippedReach as exc:
        raise ReleaseError(str(exc)) from None


def _imported_top_level(path: Path) -> set[str]:
    """The top-level module names `path` imports (a check's helpers are imported by plain
    name, the checks folder being first on sys.path)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def _copy_checks(target: Path, visible: list[Path], helpers: set[str], checks_dir: Path) -> None:
    """The visible checks and the helpers they import, but no reference module (the release
    replays what they returned: `grader.checking.recorded`); the course's evidence keys and
    diagnosis rules (`checks/diagnoses.py`: what a student's own check records and is
    diagnosed with)."""
    target.mkdir(parents=True)
    for name in ("conftest.py", DIAGNOSES):
        if (checks_dir / name).is_file():
            shutil.copy2(checks_dir / name, target / name)
    for path in visible:
        shutil.copy2(path, target / path.name)
    for name in sorted(helpers):
        if not name.endswith(SUFFIX):
            shutil.copy2(checks_dir / f"{name}.py", target / f"{name}.py")


def _write_course_file(target: Path, course: Course, exercises: list[str]) -> None:
    (target / COURSE_FILE).write_text(
        f"# The released course (built by `torchgrade release`): this release's default course."
        f"\nname = {json.dumps(course.name, ensure_ascii=False)}\n"
        f"exercises = {json.dumps(exercises)}\n", encoding="utf-8")


def _placeholder_checks(target: Path, exercises: list[str], visible: list[Path]) -> None:
    """An empty visible check file for every exercise that has hidden checks only (a bug hunt):
    the registry knows an exercise by its check files, so without one the release's
    `torchgrade check` would call it unknown instead of listing its hidden checks."""
    have = {exercise_of(f) for f in visible}
    for exercise in exercises:
        if exercise not in have:
            (target / f"test_{exercise}.py").write_text(
                f'"""{exercise} has no visible checks: its hidden checks run when your work '
                'is graded\n(`torchgrade check` lists them by title)."""\n', encoding="utf-8")


def _copy_course_probes(course: Course, target: Path) -> None:
    """The course's own probes (`probes/*.py`), if it has any, as the released course's."""
    files = sorted(course.probes_dir.glob("*.py"))
    if files:
        target.mkdir()
        for path in files:
            shutil.copyfile(path, target / path.name)


def _prune_probes(folders: list[Path], checks_dir: Path) -> None:
    """Leave out the probe modules no shipped check needs, the grader's (`grader/probes`) and the
    course's (`probes/`) alike. A probe runs in the worker, so the visible checks' probes ship
    (they hold instrumentation, no answers); but a probe only hidden checks call (a bug hunt's
    harness, say) may hold a fixed copy of the code a student must fix. A shipped check names a
    probe as `sub.probe("<module>:<function>", ...)` or imports `probes.<module>` (the course's)
    or `grader.probes.<module>`; probes may import each other. (A course's probe module is never
    named as one of the grader's: `load_course` refuses it.)"""
    probes = {p.stem: p for folder in folders for p in folder.glob("*.py")
              if p.stem != "__init__"}

    def named_in(text: str) -> set[str]:
        return {name for name in probes if re.search(
            rf"""["']{name}:|\bprobes\.{name}\b|\bfrom (?:grader\.)?probes import .*\b{name}\b""",
            text)}

    needed = set()
    for path in checks_dir.glob("*.py"):
        needed |= named_in(path.read_text(encoding="utf-8"))
    todo = list(needed)
    while todo:
        for name in named_in(probes[todo.pop()].read_text(encoding="utf-8")) - needed:
            needed.add(name)
            todo.append(name)
    for name, path in probes.items():
        if name not in needed:
            path.unlink()


def _record(target: Path, exercises: list[str], needed: set[str],
            course: Course) -> dict[str, int]:
    """Record, in a fresh process, what the reference modules return to the visible checks."""
    if not needed:
        return {}
    scratch = target.parent / ".recording"
    command = [sys.executable, "-m", "grader.release.replay", str(scratch), *exercises]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=1800,
                          env={**os.environ, ENV: str(course.root)})
    if proc.returncode != 0:
        raise ReleaseError("recording the reference values failed:\n" + proc.stderr[-3000:])
    counts = {}
    target.mkdir()
    for name in sorted(needed):
        recorded = scratch / f"{name}.json"
        if recorded.is_file():
            shutil.move(str(recorded), target / recorded.name)
            counts[name] = len(json.loads((target / recorded.name).read_text())["calls"])
    shutil.rmtree(scratch)
    return counts


# What a student may read of a fault: what it looks like, why, how to fix it, where. Everything
# else in faults.toml stays out of a release: how faults are seeded into bug hunts
# (`[[fault.inject]]` pairs hold the fixed code), which faults a bug hunt holds (`[[bughunt]]`),
# and any field added later until someone decides a student may see it.
STUDENT_FAULT_FIELDS = ("id", "title", "symptom", "cause", "fix", "exercises", "detected_by")


def student_catalogue(data: dict, visible_ids: set[str]) -> dict:
    """The fault catalogue `data` (faults.toml as read) cut down for a student release: only
    `[[fault]]` entries that a visible check detects, with their student-facing fields, their
    `detected_by` limited to visible checks and their `exercises` to those checks' exercises.
    No other table survives."""
    faults = []
    for fault in data.get("fault", []):
        detected = [d for d in fault.get("detected_by", []) if d in visible_ids]
        if not detected:
            continue
        shown = {d.split(".")[0] for d in detected}
        kept = {k: fault[k] for k in STUDENT_FAULT_FIELDS if k in fault}
        kept["detected_by"] = detected
        kept["exercises"] = [e for e in fault.get("exercises", []) if e in shown] or sorted(shown)
        faults.append(kept)
    return {"fault": faults}


def _write_catalogue(target: Path, visible_ids: set[str]) -> None:
    from grader.course.faults import load

    data = student_catalogue(load().model_dump(mode="json"), visible_ids)
    text = ("# The fault catalogue of this release (see grader/course/faults.py): the faults "
            "the visible checks can\n# detect. Generated by `torchgrade release`.\n\n"
            + toml_text(data))
    (target / "faults.toml").write_text(text, encoding="utf-8")


def toml_text(data: dict, prefix: str = "") -> str:
    """`data` as TOML (strings, numbers, booleans, dates, lists, tables, arrays of tables)."""
    lines, tables = [], []
    for key, value in data.items():
        if isinstance(value, dict):
            tables.append((key, [value], False))
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            tables.append((key, value, True))
        else:
            lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
    for key, items, array in tables:
        name = f"{prefix}{_toml_key(key)}"
        for item in items:
            lines.append("")
            lines.append(f"[[{name}]]" if array else f"[{name}]")
            lines.append(toml_text(item, f"{name}."))
    return "\n".join(line for line in lines if line is not None).strip("\n") + "\n"


def _toml_key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value) if value == value and abs(value) != float("inf") else \
            ("nan" if value != value else ("inf" if value > 0 else "-inf"))
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}"
                                for k, v in value.items()) + " }"
    return json.dumps(str(value))


# --------------------------------------------------------------------------- what students see


def _copy_stubs(target: Path, exercises: list[str]) -> None:
    from grader.release.notebooks import exercises_root, stub_path

    root = exercises_root()
    for exercise in exercises:
        stub = stub_path(exercise)
        destination = target / stub.relative_to(root)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(stub, destination)


def _dependencies() -> list[str]:
    """The full package's own requirements (without its extras)."""
    try:
        requires = metadata.requires("torchgrade") or []
    except metadata.PackageNotFoundError:
        requires = ["torch>=2.2", "numpy>=1.24", "pytest>=8.0", "nbformat>=5.9",
                    "pydantic>=2.5,<3", "jinja2>=3.1", "tqdm>=4.66", "matplotlib>=3.7",
                    "tomli>=2.0; python_version < '3.11'"]
    return [r for r in requires if "extra ==" not in r]


def _write_project(out: Path, exercises: list[str]) -> None:
    # Every folder of the grader's code that holds a module, with or without an __init__.py (a
    # folder without one was left out of the wheel: an installed release failed on its first
    # check); the course's files are package data of grader.curriculum.
    course = out / "grader" / RELEASED_COURSE
    packages = sorted({".".join(p.parent.relative_to(out).parts)
                       for p in (out / "grader").rglob("*.py")
                       if course not in p.parents} | {f"grader.{RELEASED_COURSE}"})
    deps = "".join(f"    {json.dumps(d)},\n" for d in _dependencies())
    (out / "pyproject.toml").write_text(f'''# The student release of \
torchgrade {grader.__version__}, built by `torchgrade release`.
[build-system]
requires = ["setuptools>=68", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "{DISTRIBUTION}"
version = "{grader.__version__}"
description = "Exercises and local checks for the fundamentals of deep learning with PyTorch"
readme = "README.md"
requires-python = ">=3.10"
dependencies = [
{deps}]

[project.scripts]
torchgrade = "grader.cli:main"

[project.entry-points.pytest11]
torchgrade = "grader.checking.plugin"
torchgrade-results = "grader.commands.pytest_results"

[tool.setuptools]
packages = {json.dumps(packages)}

[tool.setuptools.package-data]
"grader" = ["*.json"]
"grader.checking" = ["*.ini"]
"grader.curriculum" = ["*.toml", "exercises/*.py", "exercises/*/*.py", "checks/*.py",
                       "checks/{RECORDED_DIR}/*.json", "probes/*.py"]
"grader.templates" = ["*"]
''', encoding="utf-8")
    torch_version = versions()["torch"].split("+")[0]
    (out / "constraints.txt").write_text(
        f"# The torch the reference values of the visible checks were recorded with.\n"
        f"torch=={torch_version}\n", encoding="utf-8")
    (out / "README.md").write_text(student_readme(exercises), encoding="utf-8")


BUGHUNT_README = (
    "A bug hunt (`exercises/bughunt/`) is checked the same way, but its visible checks say "
    "nothing\nabout its faults: only that `run(seed=0)` runs to the end, returns what its "
    "docstring says, with\nfinite numbers. Finding the faults is the exercise; they are graded "
    "when you hand in.\n\n")


def student_readme(exercises: list[str]) -> str:
    from grader.release.gradescope_bundle import TORCH_INDEX
    from grader.release.notebooks import exercises_root, stub_path

    root = exercises_root()
    rows = "\n".join(f"| `{e}` | `exercises/{stub_path(e).relative_to(root).as_posix()}` | "
                     f"`notebooks/{e}.ipynb` |" for e in exercises)
    first = exercises[0]
    first_stub = f"exercises/{stub_path(first).relative_to(root).as_posix()}"
    bughunts = BUGHUNT_README if any(is_bughunt(e) for e in exercises) else ""
    return f"""# Exercises: {active_course().name}

Fill in the functions of each exercise, check your work as often as you like, hand it in.

| exercise | as a Python file | as a notebook |
| --- | --- | --- |
{rows}

Each function's docstring is its contract: what it takes, what it returns, and a worked
example. `grader/` is the grader that checks your work here, with the *visible* checks; the
*hidden* checks run when your work is graded (`torchgrade check` lists them by title).

## Set up, once

With Python 3.10 or newer, in this folder:

```bash
python3 -m venv .venv
.venv/bin/pip install -c constraints.txt --extra-index-url {TORCH_INDEX} .
```

This installs the `torchgrade` command with torch (the CPU build, the version in
`constraints.txt`). Then activate the environment in every new terminal, so that `torchgrade`
is found: `source .venv/bin/activate` (Windows: `.venv\\Scripts\\activate`). For the
notebooks you also need Jupyter: `pip install jupyterlab`.
Without installing anything here, `python -m grader ...` run from this folder works the same
as `torchgrade ...` when the dependencies listed in `pyproject.toml` are installed.

## Check your work

```bash
torchgrade check {first_stub}
```

prints every visible check with its points: what it called, what came back, what was expected
and a hint when it fails, then the titles of the hidden checks and the score. The exit code is
0 when every check passed, 1 otherwise (2 for a mistake in the command); a function you have not
filled in yet shows `[  TODO   ]`. One HTML report per exercise goes to
`torchgrade-check/<exercise>/report.html`. `--only NAME` runs the checks of one function or
class; a `.ipynb`, a folder or a `.zip` works too (`torchgrade check .` here checks every file
under `exercises/`).

{bughunts}Your code runs in a separate, sandboxed process with a time limit per call: an endless
loop or a crash costs only the checks that needed it.

## Notebooks

Open `notebooks/` in Jupyter (`.venv/bin/jupyter lab notebooks`). Each notebook explains its
exercise; after each function a **Check your work** cell runs that function's visible checks on
the cells you have run so far (in a separate grader process; the first check of a session takes
a few seconds, the next ones about one) and prints the verdicts.

## Hand in

Hand in the files named after the exercises, `.py` or `.ipynb` (`{first}.py` or `{first}.ipynb`),
as your instructor asks. In a notebook every code cell counts except the **Check your work**
cells; `%magics` and `!shell` lines are ignored, and a scratch cell that raises does not erase
your definitions (the report shows its error).
"""


# --------------------------------------------------------------------------- the leak scan


def _scan(release: Release) -> None:
    from grader.release.leaks import scan, secrets

    found = secrets()
    release.secrets = len(found)
    leaks, unreadable = scan(release.out, found)
    release.allowed = sorted({f"{leak}: {leak.allowed}" for leak in leaks if leak.allowed})
    bad = [str(leak) for leak in leaks if not leak.allowed]
    if unreadable:
        bad += [f"{path}: not a text file (a release holds text only)" for path in unreadable]
    if bad:
        raise ReleaseError(refusal(bad))


def refusal(bad: list[str], shown: int = 5) -> str:
    """One line refusing a release for what it gives away (the first `shown` leaks named)."""
    more = f"; and {len(bad) - shown} more" if len(bad) > shown else ""
    return (f"release refused, it gives answers away (nothing was kept): "
            f"{'; '.join(bad[:shown])}{more}")
