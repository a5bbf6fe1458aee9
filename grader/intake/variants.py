"""A bug-hunt variants manifest (`torchgrade variants` writes it), read for grading: which
faults each student's own copy of each bug hunt holds."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from grader.errors import UsageError

if TYPE_CHECKING:
    from grader.course.bughunt import VariantManifest

log = logging.getLogger("torchgrade")


def read_variants(path: Path) -> VariantManifest:
    """The variants manifest at `path` (UsageError if it is missing or not one)."""
    from pydantic import ValidationError

    from grader.course.bughunt import VariantManifest, catalogue_digest, slots_of

    try:
        manifest = VariantManifest.model_validate_json(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, ValidationError) as exc:
        raise UsageError(f"variants manifest {path}: cannot be read ({str(exc)[:200]})") from None
    for student, draws in manifest.students.items():
        for exercise, faults in draws.items():
            try:
                slots_of(exercise, faults)
            except ValueError as exc:
                raise UsageError(f"variants manifest {path}: {student}: {exc}") from None
    if manifest.catalogue != catalogue_digest():
        log.warning("torchgrade: warning: %s was made from another version of the bug hunts or "
                    "the fault catalogue; the students' copies may not match what is graded", path)
    return manifest
