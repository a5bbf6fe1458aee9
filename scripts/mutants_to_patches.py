"""Turn a course's whole-copy mutants (`mutants/<exercise>/<name>.py`) into patches of their
solution (`<name>.diff`: the `# must fail:` and `# diagnoses:` lines, then a unified diff), and
prove each one exact: the patch, read and applied as every command reads it
(`grader.course.folder.read_mutant`), must give back the whole copy byte for byte; only then is
the copy removed. A mutant that would not come back exactly stays as it was, and is listed.

usage: python scripts/mutants_to_patches.py [COURSE_DIR] [--context N] [--check]
       COURSE_DIR: default the shipped course; --context: lines around each change (default 2);
       --check: write nothing, prove that every patch applies and count the folder's lines

Re-runnable: patches already there are only proved again.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grader.course.folder import (DIAGNOSES, PATCH, WHOLE, CourseError, default_course,
                                  load_course, read_mutant)
from grader.course.patch import make_patch


def split_declaration(text: str) -> tuple[str, str]:
    """A whole copy's declaration lines (`# must fail:`, an optional `# diagnoses:`) and the
    module under them."""
    lines = text.split("\n", 2)
    count = 2 if len(lines) > 2 and lines[1].startswith(DIAGNOSES) else 1
    head = "".join(line + "\n" for line in lines[:count])
    return head, text[len(head):]


def convert(course_dir: Path | None, context: int, check: bool) -> int:
    course = load_course(course_dir) if course_dir else default_course()
    converted, proved, kept = 0, 0, []
    for exercise in course.exercises:
        solution_path = course.solution(exercise)
        solution = solution_path.read_text(encoding="utf-8")
        label = f"{solution_path.relative_to(course.root)}"
        for path in course.mutant_files(exercise):
            if path.suffix == PATCH:
                read_mutant(exercise, path, solution_path)  # applies, or CourseError
                proved += 1
                continue
            if check:
                kept.append(f"{path}: a whole copy")
                continue
            raw = path.read_bytes()
            text = raw.decode("utf-8")
            head, body = split_declaration(text)
            patch_path = path.with_suffix(PATCH)
            patch_path.write_text(head + make_patch(solution, body, label=label, context=context),
                                  encoding="utf-8", newline="")
            try:
                back = read_mutant(exercise, patch_path, solution_path).source()
            except CourseError as exc:
                back = f"(not read: {exc})"
            if back.encode("utf-8") != raw or "\r" in text:
                patch_path.unlink()
                kept.append(f"{path}: the patch does not give it back exactly")
                continue
            path.unlink()
            converted += 1
            proved += 1
    files = [p for p in course.mutants_dir.rglob("*") if p.is_file()
             and "__pycache__" not in p.parts]
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    whole = [p for p in files if p.suffix == WHOLE]
    print(f"{converted} whole copies made patches; {proved} patches proved to give back their "
          f"mutant byte for byte; {len(whole)} whole copies left; the mutants folder: "
          f"{len(files)} files, {lines} lines")
    for line in kept:
        print(f"  kept: {line}")
    return 1 if kept else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("course", nargs="?", type=Path)
    parser.add_argument("--context", type=int, default=2)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    return convert(args.course, args.context, args.check)


if __name__ == "__main__":
    sys.exit(main())
