"""`torchgrade release`: the student release (see `grader.release.build`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from grader.commands.common import UsageError, full_package_only
from grader.intake.plan import chosen_exercises


def release(*, out: Path, exercises: list[str] | None = None, force: bool = False):
    """Build the student release into `out` (see `grader.release.build`); a leak is an error."""
    from grader.release.build import ReleaseError, build_release

    full_package_only("release")
    try:
        return build_release(Path(out), exercises=chosen_exercises(exercises), force=force)
    except ReleaseError as exc:
        raise UsageError(str(exc)) from None



def main(args: argparse.Namespace) -> int:
    print(release_summary(release(out=args.out, exercises=args.exercises, force=args.force)))
    return 0


def release_summary(built) -> str:
    from grader.release.gradescope_bundle import TORCH_INDEX

    recorded = ", ".join(f"{n} ({k} calls)" for n, k in built.recorded.items()) or "none needed"
    lines = [f"Student release of {', '.join(built.exercises)} in {built.out}: "
             f"{len(built.files)} files.",
             f"  notebooks: {built.out / 'notebooks'}; stubs: {built.out / 'exercises'}",
             f"  reference values recorded for the visible checks: {recorded}",
             f"  hidden checks listed by title only: {built.hidden}",
             f"  leak scan: {built.secrets} secrets (solution code, reference code, hidden "
             "checks) looked for in every file: none found"]
    lines += [f"  shipped on purpose: {a}" for a in built.allowed]
    lines.append(f"Students: the set-up in {built.out / 'README.md'} (a virtual environment, "
                 f"then pip install -c constraints.txt --extra-index-url {TORCH_INDEX} .)")
    return "\n".join(lines)
