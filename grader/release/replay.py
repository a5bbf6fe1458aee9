"""The release step of recorded references (`grader.checking.recorded` replays them): run the
visible checks against the reference solutions with the grader-side reference modules recording,
in a fresh process, and write what they returned."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from grader.checking.recorded import SUFFIX, versions, wrap_for_recording



def reference_modules(checks_dir: Path) -> list[str]:
    """Names of the grader-side reference modules among the checks' helpers."""
    return sorted(p.stem for p in checks_dir.glob(f"*{SUFFIX}.py"))


def record_visible_references(out: Path, exercises: list[str], *,
                              hidden: bool = False) -> dict[str, int]:
    """Run the visible checks of `exercises` against the reference solutions (and the stubs,
    whose failing checks may take other paths) with every reference module's public functions
    recording, and write one JSON file per module into `out`. Run in a fresh process: the
    recorders must be in place before any check module imports a reference. Returns the
    number of calls recorded per module. Raises if a solution fails a visible check.
    `hidden=True` runs the hidden checks too (tests use it to know what they need)."""
    import importlib

    from grader.checking.plugin import prepare_checks
    from grader.checking.selection import CheckSelection
    from grader.course.folder import active_course
    from grader.intake.submission import load_submission
    from grader.running.runner import run_checks
    from grader.worker.client import Zygote

    course = active_course()
    prepare_checks(course.checks_dir)
    recordings = [wrap_for_recording(importlib.import_module(name))
                  for name in reference_modules(course.checks_dir)]
    with Zygote(course=course.root) as zygote:
        for root, must_pass in ((course.solutions_dir, True), (course.exercises_dir, False)):
            submission = load_submission(root, exercises=exercises, student="reference")
            result = run_checks(submission, exercises=exercises, zygote=zygote,
                                select=CheckSelection(hidden=hidden))
            failing = [c.id for c in result.checks if c.status != "passed"]
            if must_pass and failing:
                raise RuntimeError(f"the reference solutions fail visible checks {failing}: "
                                   "fix them before building a release")
    out.mkdir(parents=True, exist_ok=True)
    counts = {}
    for recording in recordings:
        if recording.calls:
            name = recording.module.rpartition(".")[2]
            (out / f"{name}.json").write_text(recording.to_json(versions()), encoding="utf-8")
            counts[name] = len(recording.calls)
    return counts


if __name__ == "__main__":
    # python -m grader.release.replay [--hidden] OUT EXERCISE...  (grader.release.build runs it)
    hidden = sys.argv[1:2] == ["--hidden"]
    arguments = sys.argv[2 if hidden else 1:]
    print(json.dumps(record_visible_references(Path(arguments[0]), arguments[1:],
                                               hidden=hidden)))
