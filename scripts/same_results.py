"""Behaviour unchanged by a refactor: grade the demo class's samples and one student per mutant
(mutants/) with a checkout's own grader, before and after, and compare every results.json.

usage: python scripts/same_results.py grade REPO OUT [CLASS]  (REPO's .venv and code; ~10 min;
           CLASS: grade that class folder instead of building one from REPO's mutants, so that
           both runs grade the very same files)
       python scripts/same_results.py compare OUT_A OUT_B  (exit 1 if any results.json differs)

Compared: everything but timings (`grading_s`, `checks_s`), dates, the `fingerprint` (it hashes
the grader's own source, so any change of code changes it by design), the assignment's name
(the class folder's) and checkout paths inside captured warnings.
"""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

VOLATILE = {"grading_s", "checks_s", "duration_s", "graded_at", "fingerprint", "assignment"}


def make_class(repo: Path, dest: Path) -> None:
    """Every declared mutant of the course at `repo` (a repository root; one student each), its
    sample class."""
    from grader.course.folder import load_course

    course = load_course(repo)
    for ex in course.exercises:
        for m in course.mutants(ex):
            p = dest / f"{ex}__{m.name}" / course.student_file(ex)
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(m.source())
    for s in sorted(course.samples_dir.iterdir()):
        if s.is_dir() and not s.name.startswith("__"):
            shutil.copytree(s, dest / f"sample__{s.name}")


def grade(repo: Path, out: Path, cls: Path | None = None) -> None:
    if cls is None:
        cls = out.with_name(out.name + "-class")
        shutil.rmtree(cls, ignore_errors=True)
        make_class(repo, cls)
    py = repo / ".venv" / "bin" / "python"
    r = subprocess.run(["nice", str(py), "-m", "grader", "grade", str(cls), "--out", str(out),
                        "-j", "2"], check=False, cwd=repo)
    print("exit", r.returncode)


_ROOT = re.compile(r"/[^\s'\"]*?/(?=(?:grader|\.venv)/)")


def strip(v):
    if isinstance(v, str):
        return _ROOT.sub("<repo>/", v)  # a warning's file path names the checkout
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if k not in VOLATILE}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v


def compare(a: Path, b: Path) -> int:
    ra = {p.relative_to(a).as_posix(): p for p in a.rglob("results.json")}
    rb = {p.relative_to(b).as_posix(): p for p in b.rglob("results.json")}
    bad = sorted(set(ra) ^ set(rb))
    same = 0
    for k in sorted(set(ra) & set(rb)):
        if strip(json.loads(ra[k].read_text())) == strip(json.loads(rb[k].read_text())):
            same += 1
        else:
            bad.append(k)
    print(f"{same} results.json identical (timings and dates aside), {len(bad)} differ or missing")
    for k in bad[:30]:
        print("  differs:", k)
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1] == "grade":
        grade(Path(sys.argv[2]).resolve(), Path(sys.argv[3]).resolve(),
              Path(sys.argv[4]).resolve() if len(sys.argv) > 4 else None)
    else:
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
