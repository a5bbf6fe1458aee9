"""A course is a folder: what torchgrade grades, released and proved (docs/AUTHORING.md).

    course.toml                 name, exercises (their order), [[equivalent]] generated mutants
    exercises/<exercise>.py     the stub students get      (a bug hunt: exercises/<path>)
    solutions/<exercise>.py     the reference solution     (a bug hunt: solutions/<path>)
    checks/test_<exercise>.py, checks/test_<exercise>_hidden.py, helper modules
    mutants/<exercise>/<name>.diff  wrong implementations as patches of the solution, line 1
                                `# must fail: check, check` (or <name>.py, a whole wrong copy)
    faults.toml, samples/       optional: catalogued faults and bug hunts; sample submissions

The shipped curriculum (the repository's root, the package data `grader.curriculum`
once installed) is the default course. `--course DIR` and `TORCHGRADE_COURSE` choose another
one for a whole command (`use_course`); everything that needs "the course" asks
`active_course()`, and what crosses into another process passes the course's root explicitly.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import keyword
import os
import pkgutil
import re
import sys
import types
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from grader.course.location import COURSE_FILE, ENV, default_root  # noqa: F401 - re-exported
from grader.course.patch import PatchError, apply_patch, parse_patch
from grader.errors import UsageError
from grader.worker.seal import COURSE_PROBES as PROBES_DIR
from grader.worker.seal import install_course_probes

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

NAME = r"^[a-z_][a-z0-9_]*$"  # an exercise: a Python identifier, lower case
CHECK_NAME = r"^[A-Za-z0-9_]+$"  # a check's function name without `test_` (may start with a digit)
BUGHUNT_PATH = r"^bughunt/[a-z0-9_]+\.py$"  # as grader.course.faults.BugHunt.path
BUGHUNT_PREFIX = "bughunt_"  # an exercise so named is a bug hunt (grader.course.bughunt)
MUST_FAIL = "# must fail:"
DIAGNOSES = "# diagnoses:"
# A declared mutant's two forms: a patch of the solution (grader/course/patch.py), or a whole
# wrong copy of it (kept for authors who prefer one, and for course folders written before).
PATCH, WHOLE = ".diff", ".py"


class CourseError(UsageError):
    """A folder that is not a valid course: the message says what is wrong and where."""


def exercise_name_problem(name: str) -> str | None:
    """Why `name` cannot name an exercise of a course, or None when it can: the one rule that
    `load_course` applies to course.toml and `torchgrade new-exercise` to its NAME. An exercise
    is the module students hand in and names its check files, so it is a lower-case ASCII
    Python identifier, not a keyword, and does not end in `_hidden` (`test_<name>.py` would
    read as another exercise's hidden checks)."""
    if not re.fullmatch(NAME, name) or keyword.iskeyword(name):
        return (f"{name!r} is not a Python identifier in lower case (a-z, 0-9 and _, not "
                "starting with a digit, not a keyword): it names the module students hand in")
    if name.endswith("_hidden"):
        return (f"{name!r} ends in _hidden (test_<name>.py would read as another exercise's "
                "hidden checks)")
    if name == PROBES_DIR:
        return (f"{name!r} is the package the course's own probes are imported as, in the "
                "worker beside the student's module")
    return None


def course_text(path: Path) -> str:
    """The UTF-8 text of one of a course's files; CourseError (one line naming the file) when
    it is missing, cannot be read or is not UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CourseError(f"{path}: missing") from None
    except UnicodeDecodeError as exc:
        raise CourseError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise CourseError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def course_source(path: Path) -> str:
    """The text of one of a course's Python files (a stub, solution, check, helper or mutant),
    proved to be Python: CourseError (one line naming the file) when it is missing, cannot be
    read, is not UTF-8 or does not compile. What every command that reads a course's files
    checks them with, so that a broken course is one clear line, not a traceback."""
    text = course_text(path)
    if compiled_as_it_is(path):
        return text
    try:
        with warnings.catch_warnings():  # an author's `is` with a literal is not our business
            warnings.simplefilter("ignore")
            compile(text, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f"{path}, line {exc.lineno}" if exc.lineno else str(path)
        raise CourseError(f"{where}: not valid Python ({exc.msg})") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # a NUL byte; nesting too deep
        raise CourseError(f"{path}: not valid Python ({type(exc).__name__}: "
                          f"{str(exc)[:200]})") from None
    return text


def compiled_as_it_is(path: Path) -> bool:
    """Whether this interpreter's bytecode cache (`__pycache__`) holds `path` as it is now: a
    timestamp-based .pyc of this Python's magic number whose header names the source's current
    mtime and size, the test the import system itself applies before it uses one. Such a file
    was compiled from this source, so compiling it again (a tenth of a second for a course's
    check helpers, on every `torchgrade check`) proves nothing new. An installation has them
    (pip compiles what it installs); without them (PYTHONDONTWRITEBYTECODE) the proof compiles."""
    try:
        cached = importlib.util.cache_from_source(str(path))
        source = path.stat()
        with open(cached, "rb") as pyc:
            header = pyc.read(16)
    except (OSError, NotImplementedError, ValueError):
        return False
    return (len(header) == 16 and header[:4] == importlib.util.MAGIC_NUMBER
            and int.from_bytes(header[4:8], "little") == 0  # not a hash-based .pyc
            and int.from_bytes(header[8:12], "little") == int(source.st_mtime) & 0xFFFFFFFF
            and int.from_bytes(header[12:16], "little") == source.st_size & 0xFFFFFFFF)


# A check is a top-level `def test_<name>` of a check file (or a name bound to one); found as
# text, not by importing or parsing, since the catalogue is validated whenever it is loaded.
_CHECK_DEF = re.compile(r"^(?:async[ \t]+)?def[ \t]+test_(\w+)|^test_(\w+)[ \t]*=",
                        re.MULTILINE)


def declared_check_ids(checks_dir: Path) -> set[str]:
    """Ids (`exercise.check`) of the checks the check files of `checks_dir` define; files that
    cannot be read define none (`course_source` says why where it matters)."""
    found = set()
    for path in checks_dir.glob("test_*.py"):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        found |= {f"{exercise_of(path)}.{a or b}" for a, b in _CHECK_DEF.findall(text)}
    return found


class Equivalent(BaseModel):
    """A generated mutant that changes nothing a student could be graded on, with why: `torchgrade
    verify` lists it as equivalent, not as a survivor. `change` is the text verify printed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    exercise: str = Field(pattern=NAME)
    change: str = Field(min_length=1)
    reason: str = Field(min_length=1)


class ShippedOnPurpose(BaseModel):
    """Code a student release ships on purpose although a solution or a hidden check holds it
    too: the leak scan's `secret` (as its refusal names it) found in `file` (the end of a path
    the release holds), and why that is no leak."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    secret: str = Field(min_length=1)
    file: str = Field(min_length=1)
    reason: str = Field(min_length=1)


class CourseConfig(BaseModel):
    """course.toml."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    exercises: list[str] = Field(min_length=1, description="the exercises, in course order")
    equivalent: list[Equivalent] = []
    shipped_on_purpose: list[ShippedOnPurpose] = []


@dataclass(frozen=True)
class DeclaredMutant:
    """A wrong implementation an author wrote (`mutants/<exercise>/<name>.diff`, a patch of the
    solution, or `<name>.py`, a whole copy): `fails` are the check ids (`exercise.check`) it must
    fail, exactly; `diagnoses` the catalogued faults the failing checks must name; `text` the
    module graded (a patch: applied when the mutant was read)."""

    exercise: str
    name: str
    path: Path
    fails: frozenset[str]
    diagnoses: frozenset[str] = frozenset()
    text: str | None = field(default=None, repr=False, compare=False)

    def source(self) -> str:
        return self.path.read_text(encoding="utf-8") if self.text is None else self.text


# What, in a process, makes torch import torch._dynamo (~1.8 s): the first call of an
# optimizer's methods (torch.optim), torch.compile, torch.export.
OPTIMIZER_WORDS = re.compile(r"optim|compile|export|_dynamo")


@dataclass(frozen=True)
class Course:
    root: Path
    name: str
    exercises: tuple[str, ...]
    equivalent: tuple[Equivalent, ...] = ()
    shipped_on_purpose: tuple[ShippedOnPurpose, ...] = ()

    @property
    def exercises_dir(self) -> Path:
        return self.root / "exercises"

    @property
    def solutions_dir(self) -> Path:
        return self.root / "solutions"

    @property
    def checks_dir(self) -> Path:
        return self.root / "checks"

    @property
    def probes_dir(self) -> Path:
        """Its own probes (optional): `sub.probe("<module>:<function>")` runs one in the worker,
        and its checks import them as `probes.<module>`."""
        return self.root / PROBES_DIR

    @property
    def mutants_dir(self) -> Path:
        return self.root / "mutants"

    @property
    def samples_dir(self) -> Path:
        return self.root / "samples"

    @property
    def faults_file(self) -> Path:
        return self.root / "faults.toml"

    def student_file(self, exercise: str) -> str:
        """The file name a student hands in for `exercise`, relative to the exercises folder:
        `bughunt_<name>` hands in `bughunt/<name>.py` (faults.toml's `[[bughunt]]` says so and
        is held to it), any other exercise `<exercise>.py`. Derived from the name, not read
        from `[[bughunt]]`, because a student release's course has no such table (it
        would say which faults a script holds) and must still find the scripts."""
        return bughunt_file(exercise) if exercise.startswith(BUGHUNT_PREFIX) else f"{exercise}.py"

    def stub(self, exercise: str) -> Path:
        return self.exercises_dir / self.student_file(exercise)

    def solution(self, exercise: str) -> Path:
        return self.solutions_dir / self.student_file(exercise)

    def may_build_optimizers(self, exercises: list[str]) -> bool:
        """Whether checking `exercises` may build a torch.optim optimizer (whose first use
        imports torch._dynamo, ~1.8 s): if the stub of one of them, which names what its checks
        and probes use (a training loop's, a bug hunt's), mentions one, or cannot
        be read. Loose on purpose: a word that matches for another reason (`re.compile`) only
        costs that import ahead of time, as before; a process that builds one unannounced
        imports it then, once."""
        for exercise in exercises:
            try:
                stub = self.stub(exercise).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError, ValueError):
                return True
            if OPTIMIZER_WORDS.search(stub):
                return True
        return False

    def check_files(self, exercises: list[str] | None = None, *,
                    checks_dir: Path | None = None) -> list[Path]:
        """The check files of `exercises` (default: all) in `checks_dir` (default: the course's
        own), in course order, visible first."""
        files = [f for f in (checks_dir or self.checks_dir).glob("test_*.py")
                 if exercises is None or exercise_of(f) in exercises]
        return sorted(files, key=lambda f: (self.order(exercise_of(f)),
                                            f.stem.endswith("_hidden")))

    def order(self, exercise: str) -> tuple[int, str]:
        """Sort key: course order, then exercises course.toml does not list, by name."""
        listed = self.exercises
        return (listed.index(exercise) if exercise in listed else len(listed), exercise)

    def sources(self, exercises: list[str] | None = None, *,
                solutions: bool = True) -> list[Path]:
        """The Python files a command reads for `exercises`: their stubs, solutions (those
        present, unless `solutions` requires them all: a student release has none), check
        files and the checks' helper modules. Default (every exercise): every Python file
        under exercises/, solutions/ and checks/ (a release's leak scan reads them all)."""
        chosen = list(self.exercises) if exercises is None else list(exercises)
        files = [self.stub(e) for e in chosen]
        files += [self.solution(e) for e in chosen if solutions or self.solution(e).exists()]
        files += [self.checks_dir / f"test_{e}{end}.py" for e in chosen
                  for end in ("", "_hidden") if (self.checks_dir / f"test_{e}{end}.py").exists()]
        files += [p for p in self.checks_dir.glob("*.py") if not p.name.startswith("test_")]
        if exercises is None:
            files += [p for folder in (self.exercises_dir, self.solutions_dir, self.checks_dir)
                      for p in folder.rglob("*.py") if "__pycache__" not in p.parts]
        return list(dict.fromkeys(files))  # in order, once each

    def check_sources(self, exercises: list[str] | None = None, *,
                      solutions: bool = True) -> None:
        """Raise CourseError (one line naming the file) unless every file of `sources` is
        there and readable UTF-8 Python."""
        for exercise in self.exercises if exercises is None else exercises:
            wanted = [("stub", self.stub(exercise))]
            wanted += [("solution", self.solution(exercise))] if solutions else []
            for what, path in wanted:
                if not path.exists():
                    raise CourseError(f"{exercise}: its {what} {path} is missing")
        for path in self.sources(exercises, solutions=solutions):
            course_source(path)

    def mutants(self, exercise: str) -> list[DeclaredMutant]:
        """The declared mutants of `exercise`, by name; raises CourseError for a file that is
        not UTF-8 text, whose first line is not `# must fail: ...`, or a patch that does not
        apply to the solution."""
        return [read_mutant(exercise, path, self.solution(exercise))
                for path in self.mutant_files(exercise)]

    def mutant_files(self, exercise: str) -> list[Path]:
        """The files of `exercise`'s declared mutants, by name: patches (`<name>.diff`) and
        whole copies (`<name>.py`). CourseError when a name has both."""
        folder = self.mutants_dir / exercise
        files = sorted(p for p in folder.glob("*") if p.suffix in (PATCH, WHOLE) and p.is_file())
        names = [p.stem for p in files]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise CourseError(f"{folder}: mutant {twice[0]} is there twice, as "
                              f"{twice[0]}{PATCH} and {twice[0]}{WHOLE}: keep one")
        return sorted(files, key=lambda p: p.stem)


def exercise_of(path: Path | str) -> str:
    """The exercise a check file belongs to: `test_<exercise>[_hidden].py`."""
    return Path(path).stem.removeprefix("test_").removesuffix("_hidden")


def read_mutant(exercise: str, path: Path, solution: Path | None = None) -> DeclaredMutant:
    """The mutant at `path`; CourseError (naming the file) when it is not UTF-8 text, does not
    declare what it fails, or is a patch (`.diff`) that cannot be read or does not apply to
    `solution` (the exercise's). Not compiled: a mutant that does not even compile is a wrong
    module like any other (it fails every check).

    A patch's module is its `# must fail:` (and `# diagnoses:`) lines followed by the solution
    with the patch applied: the very text of the whole copy it stands for, line numbers and all."""
    text = course_text(path)
    lines = text.splitlines()[:2] + ["", ""]
    where = f"{path}: line 1 must be `{MUST_FAIL} check, check` (check names without test_)"
    if not lines[0].startswith(MUST_FAIL):
        raise CourseError(where)
    fails = _names(lines[0].removeprefix(MUST_FAIL))
    diagnoses = _names(lines[1].removeprefix(DIAGNOSES)) if lines[1].startswith(DIAGNOSES) else []
    if not fails:
        raise CourseError(f"{where}; it names none")
    bad = [n for n in fails if not re.match(CHECK_NAME, n)]
    if bad:
        raise CourseError(f"{path}: line 1 names {bad}, which cannot be check names (a check is "
                          "named by its function's name without test_, e.g. values_match)")
    return DeclaredMutant(exercise, path.stem, path,
                          frozenset(f"{exercise}.{n.removeprefix('test_')}" for n in fails),
                          frozenset(diagnoses),
                          _patched(path, text, solution) if path.suffix == PATCH else text)


def _patched(path: Path, text: str, solution: Path | None) -> str:
    """The module a patch mutant stands for: its declaration lines, then `solution` patched."""
    if solution is None:
        raise ValueError(f"{path}: a patch mutant needs the solution it applies to")
    try:
        base = course_text(solution)
    except CourseError as exc:
        raise CourseError(f"{path}: the solution it patches cannot be read ({exc})") from None
    try:
        patched = apply_patch(parse_patch(text), base, target=_near(solution, path))
    except PatchError as exc:
        raise CourseError(f"{path}: {exc}") from None
    declared = text.split("\n", 2)
    head = declared[0] + "\n"
    if len(declared) > 1 and declared[1].startswith(DIAGNOSES):
        head += declared[1] + "\n"
    return head + patched


def _near(solution: Path, mutant: Path) -> str:
    """`solution` as seen from the course folder that holds `mutant` (mutants/<exercise>/)."""
    try:
        return str(solution.relative_to(mutant.parents[2]))
    except (ValueError, IndexError):
        return str(solution)


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


@lru_cache(maxsize=32)
def _load(root: Path, stamps: tuple[int, ...]) -> Course:
    toml = root / COURSE_FILE
    try:
        config = CourseConfig.model_validate(tomllib.loads(toml.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError) as exc:
        raise CourseError(f"{toml}: cannot be read ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise CourseError(f"{toml}: not valid TOML ({exc})") from None
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'file'}: {e['msg']}"
                             for e in exc.errors())
        raise CourseError(f"{toml}: {problems}") from None
    for name in config.exercises:
        if problem := exercise_name_problem(name):
            raise CourseError(f"{toml}: exercises must be distinct lower-case Python names; "
                              f"{problem}")
    if len(set(config.exercises)) != len(config.exercises):
        raise CourseError(f"{toml}: exercises must be distinct lower-case Python names (a name "
                          "is listed twice)")
    course = Course(root=root, name=config.name, exercises=tuple(config.exercises),
                    equivalent=tuple(config.equivalent),
                    shipped_on_purpose=tuple(config.shipped_on_purpose))
    _check_bughunt_paths(root)
    _require_files(course)
    _refuse_shadowing(root / "checks")
    _check_probe_names(course)
    return course


def _check_probe_names(course: Course) -> None:
    """A course's probe modules are named as `sub.probe("<module>:<function>")` names them: a
    Python name, and none of the grader's own probe modules (`grader.probes`: the generic
    recorders any course may import), which the worker resolves under the same names."""
    import grader.probes as generic

    ours = {info.name for info in pkgutil.iter_modules(generic.__path__)}
    for path in sorted(course.probes_dir.glob("*.py")):
        if not path.stem.isidentifier() or keyword.iskeyword(path.stem):
            raise CourseError(f"{path}: a probe module's name must be a Python name (it is "
                              "imported as probes.<name>)")
        if path.stem in ours:
            raise CourseError(f"{path}: grader.probes.{path.stem} is one of the grader's own "
                              "probe modules; name the course's another way")


def _require_files(course: Course) -> None:
    """Every exercise course.toml lists has its stub and its visible check file (the hidden one
    is optional; a solution is checked by the commands that read it: a student release has
    none). Presence only: reading every file is `Course.check_sources`, for commands that do."""
    for exercise in course.exercises:
        for what, path in (("stub", course.stub(exercise)),
                           ("visible check file", course.checks_dir / f"test_{exercise}.py")):
            if not path.is_file():
                state = "is not a file" if path.exists() else "is missing"
                raise CourseError(f"{course.root / COURSE_FILE}: exercise {exercise}: its {what} "
                                  f"{path} {state}")


def _refuse_shadowing(checks_dir: Path) -> None:
    """CourseError for a file of `checks_dir` named like an installed top-level module
    (`numpy.py`, `grader.py`, `pytest.py`, `json.py`): the checks folder goes first on sys.path
    and its helpers are imported by plain name, so the one would hide the other, in the grader
    and in every check. Every file counts, check files too."""
    search = _search_path(checks_dir)  # once for every file: resolving it is the slow part
    for path in sorted(checks_dir.glob("*.py")):
        where = installed_module(path.stem, checks_dir, search)
        if where:
            raise CourseError(f"{path}: named like the installed module {path.stem} ({where}); "
                              "a check helper is imported by plain name, so one would hide "
                              "the other: rename the file")


def installed_module(name: str, checks_dir: Path,
                     search: tuple[set[Path], list[str]] | None = None) -> str | None:
    """Where `name` is importable from as a top-level module other than `checks_dir` (the
    standard library, site-packages, an editable install), or None. Finds, never imports:
    the finders are asked with the checks folder and the working directory left out, and the
    checks folders of other courses this process graded (`import_checks_from` put them on
    sys.path: their helpers are no installed modules). `search`: `_search_path(checks_dir)`,
    when the caller asks about many names."""
    if name in sys.builtin_module_names or name in sys.stdlib_module_names:
        return "the standard library"
    if name.startswith("__"):
        return None
    leave_out, paths = search or _search_path(checks_dir)
    for finder in sys.meta_path:
        try:
            if finder is importlib.machinery.PathFinder:
                spec = finder.find_spec(name, paths)
            else:
                find = getattr(finder, "find_spec", None)
                spec = find(name, None) if find is not None else None
        except (ImportError, ValueError, OSError):
            continue
        if spec is None:
            continue
        folder = _resolved(spec.origin).parent if spec.origin else None
        if folder is None or (folder not in leave_out and not _is_checks_folder(folder)):
            return spec.origin or "a namespace package"
    return None


def _search_path(checks_dir: Path) -> tuple[set[Path], list[str]]:
    """The folders `installed_module` leaves out, and sys.path without them."""
    leave_out = {checks_dir.resolve(), Path.cwd().resolve()}
    paths = [p for p in sys.path if p and _resolved(p) not in leave_out
             and not _is_checks_folder(_resolved(p))]
    return leave_out, paths


def _is_checks_folder(path: Path) -> bool:
    """Whether `path` is the checks folder of a course (of any course)."""
    return path.name == "checks" and (path.parent / COURSE_FILE).is_file()


def _resolved(path: str) -> Path:
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError):
        return Path(path)


def bughunt_file(exercise: str) -> str:
    """The script bug hunt `exercise` (`bughunt_<name>`) hands in: `bughunt/<name>.py`."""
    return f"bughunt/{exercise.removeprefix(BUGHUNT_PREFIX)}.py"


def _check_bughunt_paths(root: Path) -> None:
    """CourseError unless every `[[bughunt]]` of the course's faults.toml gives its script the
    path `bughunt_file` derives (a release, whose faults.toml has no such table, finds the
    scripts by that rule alone). Read without validating the rest of the catalogue
    (grader.course.faults does that)."""
    faults = root / "faults.toml"
    if not faults.is_file():
        return
    try:
        data = tomllib.loads(faults.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CourseError(f"{faults}: cannot be read ({exc})") from None
    paths = {str(b.get("exercise")): str(b.get("path")) for b in data.get("bughunt", [])
             if isinstance(b, dict)}
    bad = [p for p in paths.values() if not re.match(BUGHUNT_PATH, p)]
    if bad:
        raise CourseError(f"{faults}: a bug hunt's path must be bughunt/<name>.py ({bad[0]!r})")
    for exercise, path in paths.items():
        if path != (wanted := bughunt_file(exercise)):
            raise CourseError(f"{faults}: bug hunt {exercise}: its path must be {wanted!r} "
                              f"(not {path!r})")


def load_course(root: Path | str) -> Course:
    """The course in folder `root`; CourseError (one line) when it is not one."""
    path = Path(root).expanduser()
    if not (path / COURSE_FILE).is_file():
        what = "no such folder" if not path.is_dir() else f"it has no {COURSE_FILE}"
        raise CourseError(f"{root}: not a course folder ({what}; `torchgrade new-exercise NAME "
                          f"--course {root}` makes one)")
    path = path.resolve()
    # Whatever _load reads or requires, changed, reloads the course: course.toml, faults.toml
    # (the bug hunts' paths), a file added to checks/ (a helper that may shadow a module) or
    # removed from exercises/ (a stub now missing).
    return _load(path, tuple(_stamp(path / rel) for rel in
                             (COURSE_FILE, "faults.toml", "checks", "exercises", PROBES_DIR)))


def _stamp(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def default_course() -> Course:
    return load_course(default_root())


_chosen: Course | None = None


def use_course(course: Course | None) -> None:
    """Make `course` the active course of this process (None: back to TORCHGRADE_COURSE or the
    default). What `--course DIR` does for a command."""
    global _chosen
    _chosen = course


def active_course() -> Course:
    """The course `use_course` chose, else the one TORCHGRADE_COURSE names, else the
    shipped curriculum."""
    if _chosen is not None:
        return _chosen
    env = os.environ.get(ENV)
    return load_course(env) if env else default_course()


def course_option(value: str | None) -> Course:
    """The course a command's `--course` names (None: TORCHGRADE_COURSE, else the default),
    made active for the rest of the command."""
    course = load_course(value) if value else active_course()
    use_course(course)
    # Processes this command starts (the recording of a release, the notebook check server, a
    # zygote's self-test of what workers must not see) take the same course. Only a course
    # named by --course is exported: the default one is every process's default already, and
    # an in-process caller (a test, a notebook) must not be left pinned to it.
    if value:
        os.environ[ENV] = str(course.root)
    return course


# --------------------------------------------------------------------------- importing checks

_solutions: dict[Path, types.ModuleType] = {}


def solution_module(exercise: str) -> types.ModuleType:
    """The active course's reference solution of `exercise`, imported in the grader (once per
    file): for hidden checks that compute expected values with it. A release has no solutions,
    so a visible check must not call this."""
    course = active_course()
    path = course.solution(exercise).resolve()
    if path not in _solutions:
        if not path.is_file():
            raise CourseError(f"{exercise}: no reference solution at {path}")
        name = f"torchgrade_solution_{exercise}_{abs(hash(path)):x}"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        # Registered before it runs: dataclasses and pickling look their module up by name.
        sys.modules[name] = module
        spec.loader.exec_module(module)
        _solutions[path] = module
    return _solutions[path]


def import_checks_from(checks_dir: Path) -> None:
    """Make the helpers of `checks_dir` importable by plain name (`from m_cases import X`), as
    its check files expect: `checks_dir` first on sys.path, and any module already imported
    under the name of one of its files but from elsewhere (another course's helper, a recorded
    stand-in) forgotten, so that two courses with helpers of the same name never mix."""
    checks_dir = checks_dir.resolve()
    for stem in {p.stem for p in checks_dir.glob("*.py")} | {
            p.stem for p in (checks_dir / "recorded").glob("*.json")}:
        module = sys.modules.get(stem)
        file = getattr(module, "__file__", None) if module is not None else None
        if module is not None and (file is None or Path(file).resolve().parent != checks_dir):
            del sys.modules[stem]
    if sys.path[:1] != [str(checks_dir)]:
        if str(checks_dir) in sys.path:
            sys.path.remove(str(checks_dir))
        sys.path.insert(0, str(checks_dir))
    # The course's own probes, as its checks import them (`from probes.<module> import ...`).
    probes = checks_dir.parent / PROBES_DIR
    install_course_probes(probes if probes.is_dir() else None)
