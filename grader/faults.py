"""The fault catalogue: the ways training goes silently wrong, in one place.

Every entry says what the student sees (symptom), why it happens (cause), what to change (fix),
the exercises it can appear in and the checks that detect it. Diagnoses name entries by `id`;
reports show their text. The catalogue is data (`faults.toml`, shipped with the package),
validated by the `Fault` model when it is loaded.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib


class Fault(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$", description="stable, e.g. grad-not-zeroed")
    title: str
    symptom: str = Field(description="what the student sees")
    cause: str = Field(description="why it happens")
    fix: str = Field(description="what to change")
    exercises: list[str] = Field(min_length=1, description="exercises it can appear in")
    detected_by: list[str] = Field(min_length=1, description="check ids that detect it")


class Catalogue(BaseModel):
    fault: list[Fault]


@lru_cache(maxsize=1)
def catalogue() -> dict[str, Fault]:
    """Every fault by id (validated; ids unique)."""
    text = (resources.files("grader") / "faults.toml").read_text(encoding="utf-8")
    faults = Catalogue.model_validate(tomllib.loads(text)).fault
    by_id = {f.id: f for f in faults}
    if len(by_id) != len(faults):
        raise ValueError("faults.toml: duplicate fault ids")
    return by_id
