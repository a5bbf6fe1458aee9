"""A PrairieLearn external grader that runs torchgrade (results format:
`grader.outputs.prairielearn`).

`build_grader(out, ...)` writes:

    out/info.json        the block to merge into each question's info.json: `gradingMethod`
                         "External" and `externalGradingOptions` (enabled, image, entrypoint,
                         timeout); the entrypoint names the question's exercises
    out/image/           the image recipe, built with `docker build -t IMAGE out/image`:
        Dockerfile       python 3.11, bubblewrap, torch 2.13.0 (CPU build), this torchgrade
        requirements.txt (from its wheel in wheels/), the course in course/
        wheels/          and assignment.toml (every chosen exercise at its points)
        course/
        assignment.toml
        grade.sh         the entrypoint: grades /grade/student, writes /grade/results/results.json
    out/README.md        these steps, for the course's staff

Nothing comes from `serverFilesCourse`: the grader, the course and its hidden checks live in the
image, never in the course repository students' questions are served from. Each submission is
graded in its own PrairieLearn grading container, so a course grows with PrairieLearn's graders,
not with a scheduler of ours. `TORCHGRADE_PRAIRIELEARN_ROOT` (default `/grade`),
`TORCHGRADE_PRAIRIELEARN_HOME` (default `/opt/torchgrade`) and `TORCHGRADE_PYTHON` let a test run
grade.sh against a fake tree with an already installed torchgrade.
"""

from __future__ import annotations

import json
import shutil
import stat
import tempfile
from pathlib import Path

import grader
from grader.course.folder import active_course
from grader.outputs.prairielearn import ROOT_VARIABLE
from grader.release.gradescope_bundle import (assignment_toml, build_wheel, course_files,
                                              requirements_txt)

HOME = "/opt/torchgrade"
HOME_VARIABLE = "TORCHGRADE_PRAIRIELEARN_HOME"
MAX_TIMEOUT = 600  # PrairieLearn's ceiling on a grading job, seconds
DEFAULT_TIMEOUT = 120

DOCKERFILE = """\
# The PrairieLearn grading image of torchgrade {version} (`torchgrade prairielearn`).
# Build: docker build -t {image} .   then push it where PrairieLearn pulls images from.
FROM python:3.11-slim
# bubblewrap: each student's code runs in its own sandbox inside the grading container.
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap \\
    && rm -rf /var/lib/apt/lists/*
WORKDIR {home}
COPY requirements.txt ./
# torch first, pinned to the CPU build; then this torchgrade (its other dependencies from PyPI).
RUN python -m venv {home}/venv && {home}/venv/bin/pip install --no-cache-dir -r requirements.txt
COPY wheels/ wheels/
RUN {home}/venv/bin/pip install --no-cache-dir wheels/torchgrade-{version}-*.whl
COPY course/ course/
COPY assignment.toml grade.sh ./
RUN chmod 0755 grade.sh && {home}/venv/bin/python -c "import grader, torch; \\
print('torchgrade', grader.__version__, 'torch', torch.__version__)"
"""

GRADE_SH = """\
#!/usr/bin/env bash
# PrairieLearn runs this in the grading container for every submission: it grades
# $ROOT/student and must leave $ROOT/results/results.json. Its one optional argument is the
# question's exercises (a,b; default: every exercise of assignment.toml).
# {root_variable}, {home_variable} and TORCHGRADE_PYTHON are for local tests.
set -uo pipefail
ROOT="${{{root_variable}:-/grade}}"
HOME_DIR="${{{home_variable}:-{home}}}"
PYTHON="${{TORCHGRADE_PYTHON:-$HOME_DIR/venv/bin/python}}"
mkdir -p "$ROOT/results"
rm -f "$ROOT/results/results.json"
if [ -n "${{1:-}}" ]; then CHOSEN=(--exercises "$1"); else
    CHOSEN=(--assignment "$HOME_DIR/assignment.toml"); fi
# -I: the current folder (whatever the job starts in) never shadows the installed grader.
"$PYTHON" -I -m grader.cli prairielearn-run --root "$ROOT" --course "$HOME_DIR/course" \\
    "${{CHOSEN[@]}}"{reveal}
status=$?
if [ ! -s "$ROOT/results/results.json" ]; then
    # torchgrade could not even start: still a results.json, so the student sees why.
    printf '{{"gradable": false, "message": "Not graded: the grader failed to start (exit %s); '\\
'please tell the course staff.", "format_errors": ["the grader failed to start (exit %s)"]}}\\n' \\
        "$status" "$status" > "$ROOT/results/results.json"
fi
exit 0
"""

README = """\
# torchgrade as a PrairieLearn external grader

1. Build the image and push it where PrairieLearn pulls grader images from:

       docker build -t {image} image/
       docker push {image}

2. In each question's `info.json`, add the two keys of `info.json` here (`gradingMethod` and
   `externalGradingOptions`). Its entrypoint grades {exercises}; for a question on other
   exercises of the course, name them after the entrypoint: `{home}/grade.sh a,b`.

3. Let students hand in the exercise files under their usual names (`pl-file-editor` or
   `pl-file-upload` with `file-name="<exercise>.py"`, or the .ipynb). PrairieLearn copies them to
   `/grade/student`; the grader writes `/grade/results/results.json`: a score from 0 to 1 and one
   test per check ({hidden}).
"""


def info_json(*, image: str, exercises: list[str] | None, timeout: int) -> dict:
    """The keys to merge into a question's info.json (PrairieLearn's external grading options).
    The entrypoint names `exercises` (graded at their declared points); without them it
    grades the image's assignment.toml (the points an assignment file gave)."""
    entrypoint = f"{HOME}/grade.sh" + (f" {','.join(exercises)}" if exercises else "")
    return {"gradingMethod": "External",
            "externalGradingOptions": {"enabled": True, "image": image,
                                       "entrypoint": entrypoint, "timeout": timeout}}


def build_grader(out: Path, *, name: str, exercises: list[tuple[str, float | None]],
                 image: str, timeout: int = DEFAULT_TIMEOUT, reveal_hidden: bool = False,
                 from_assignment: bool = False) -> Path:
    """Write the grader's files into `out` (see the module's docstring); returns `out`. With
    `from_assignment` (the points come from an assignment file), info.json's entrypoint grades
    assignment.toml rather than naming the exercises."""
    out = Path(out)
    chosen = [e for e, _ in exercises]
    recipe = out / "image"
    if recipe.exists():
        shutil.rmtree(recipe)
    (recipe / "wheels").mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="torchgrade-pl-") as tmp:
        wheel = build_wheel(Path(tmp))
        shutil.copy2(wheel, recipe / "wheels" / wheel.name)
    course = active_course()
    for path, inside in course_files(course):  # course/<part>/...
        target = recipe / inside
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    texts = {
        "Dockerfile": DOCKERFILE.format(version=grader.__version__, image=image, home=HOME),
        "requirements.txt": requirements_txt(),
        "assignment.toml": assignment_toml(name, exercises),
        "grade.sh": GRADE_SH.format(root_variable=ROOT_VARIABLE, home_variable=HOME_VARIABLE,
                                    home=HOME, reveal=" --reveal-hidden" if reveal_hidden
                                    else ""),
    }
    for filename, text in texts.items():
        (recipe / filename).write_text(text, encoding="utf-8")
    grade_sh = recipe / "grade.sh"
    grade_sh.chmod(grade_sh.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    named = None if from_assignment else chosen
    (out / "info.json").write_text(json.dumps(info_json(image=image, exercises=named,
                                                        timeout=timeout), indent=2) + "\n",
                                   encoding="utf-8")
    (out / "README.md").write_text(README.format(
        image=image, exercises=", ".join(chosen), home=HOME,
        hidden=("hidden checks with their points and pass/fail only: rebuild with "
                "--reveal-hidden to show their messages" if not reveal_hidden
                else "hidden checks too, with every message: built with --reveal-hidden")),
        encoding="utf-8")
    return out
