"""A Gradescope autograder bundle that runs torchgrade (results format:
`grader.outputs.gradescope`).

The bundle (`build_bundle`) is a zip with `setup.sh` (installs torch 2.13.0, CPU build, and the
torchgrade wheel shipped in the zip), `run_autograder` (grades `/autograder/submission` and writes
`/autograder/results/results.json`), the assignment file and the course graded with (`course/`:
its course.toml, faults.toml, stubs, solutions and checks). Each submission is graded in its own
Gradescope container: that is how a course grows beyond one machine without a scheduler of ours.
`TORCHGRADE_AUTOGRADER_ROOT` (default `/autograder`) and `TORCHGRADE_PYTHON` let a test run the
bundle's `run_autograder` against a fake tree with an already installed torchgrade.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import grader
from grader.course.folder import Course, active_course
from grader.outputs.gradescope import ROOT_VARIABLE

TORCH_REQUIREMENT = "torch==2.13.0"
# The CPU-only build: PyPI's Linux wheel of torch pulls several GB of CUDA libraries.
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"


SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image.
set -euo pipefail
cd /autograder/source
if ! python3 -c "import ensurepip" >/dev/null 2>&1; then
    apt-get update && apt-get install -y --no-install-recommends python3 python3-venv python3-pip
fi
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install --upgrade pip
# torch first, pinned to the CPU build; then this torchgrade (its other dependencies from PyPI).
/autograder/venv/bin/pip install -r requirements.txt
/autograder/venv/bin/pip install wheels/torchgrade-{version}-*.whl
/autograder/venv/bin/python -c "import grader, torch; \
print('torchgrade', grader.__version__, 'torch', torch.__version__)"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission, from /autograder; it must write
# results/results.json. TORCHGRADE_AUTOGRADER_ROOT and TORCHGRADE_PYTHON are for local tests.
set -euo pipefail
ROOT="${{{root_variable}:-/autograder}}"
PYTHON="${{TORCHGRADE_PYTHON:-$ROOT/venv/bin/python}}"
# -I: neither the current directory nor PYTHON* variables reach the grader's own imports.
exec "$PYTHON" -I -m grader.cli gradescope-run --root "$ROOT" \\
    --assignment "$ROOT/source/assignment.toml" --course "$ROOT/source/course"
"""


def requirements_txt() -> str:
    return (f"# torch {TORCH_REQUIREMENT.split('==')[1]}, CPU build (no CUDA libraries)\n"
            f"--extra-index-url {TORCH_INDEX}\n{TORCH_REQUIREMENT}\n")


def assignment_toml(name: str, exercises: list[tuple[str, float | None]]) -> str:
    """A minimal assignment file (exercises and points) for the bundle."""
    lines = [f"name = {json.dumps(name)}", "exercises = ["]
    for exercise, points in exercises:
        lines.append(f"  {{ name = {json.dumps(exercise)}"
                     + (f", points = {points!r}" if points is not None else "") + " },")
    lines.append("]")
    return "\n".join(lines) + "\n"


def build_wheel(target: Path) -> Path:
    """A wheel of this very torchgrade: built from its source tree when it runs from one, else
    repacked from the installed files (their RECORD)."""
    source = Path(grader.__file__).resolve().parent.parent
    if (source / "pyproject.toml").is_file() and (source / "grader").is_dir():
        command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(target),
                   str(source)]
        try:
            import setuptools  # noqa: F401 - building in place needs no download
            command.insert(4, "--no-build-isolation")
        except ImportError:
            pass
        proc = subprocess.run(command, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"building the torchgrade wheel failed:\n{proc.stderr[-2000:]}")
        return next(target.glob("torchgrade-*.whl"))
    return repack_installed_wheel(target)


def repack_installed_wheel(target: Path) -> Path:
    from importlib import metadata

    dist = metadata.distribution("torchgrade")
    files = [f for f in dist.files or [] if not str(f).endswith(".pyc")
             and "__pycache__" not in str(f) and not str(f).startswith("..")]
    wheel = target / f"torchgrade-{dist.version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for f in files:
            path = Path(f.locate())
            if path.is_file() and not str(f).endswith(".dist-info/RECORD"):
                z.write(path, str(f))
        info = next(str(f).split("/")[0] for f in files if ".dist-info/" in str(f))
        z.writestr(f"{info}/RECORD", "")  # pip rewrites RECORD on install
    return wheel


# What of a course grading needs: not its sample class or its mutants.
COURSE_PARTS = ("course.toml", "faults.toml", "exercises", "solutions", "checks")


def course_files(course: Course) -> list[tuple[Path, str]]:
    """(file, name in the zip) of the course the bundle grades with, under `course/`."""
    out = []
    for part in COURSE_PARTS:
        top = course.root / part
        files = [top] if top.is_file() else sorted(top.rglob("*")) if top.is_dir() else []
        out += [(f, f"course/{f.relative_to(course.root).as_posix()}") for f in files
                if f.is_file() and "__pycache__" not in f.parts]
    return out


def build_bundle(out: Path, *, name: str, exercises: list[tuple[str, float | None]]) -> Path:
    """Write `out/<name>-gradescope-autograder.zip` and return its path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    zip_path = out / f"{name or 'torchgrade'}-gradescope-autograder.zip"
    with tempfile.TemporaryDirectory(prefix="torchgrade-bundle-") as tmp:
        wheel = build_wheel(Path(tmp))
        entries = {
            "setup.sh": SETUP_SH.format(version=grader.__version__),
            "run_autograder": RUN_AUTOGRADER.format(root_variable=ROOT_VARIABLE),
            "requirements.txt": requirements_txt(),
            "assignment.toml": assignment_toml(name, exercises),
        }
        partial = zip_path.with_name(f".{zip_path.name}.tmp")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as z:
            for filename, text in entries.items():
                info = zipfile.ZipInfo(filename, date_time=(2020, 1, 1, 0, 0, 0))
                executable = filename in ("setup.sh", "run_autograder")
                info.external_attr = ((0o755 if executable else 0o644) | stat.S_IFREG) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, text)
            z.write(wheel, f"wheels/{wheel.name}")
            for path, name in course_files(active_course()):
                z.write(path, name)
        os.replace(partial, zip_path)
    return zip_path
