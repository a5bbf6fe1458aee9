"""Look for answers in a folder (a student release): solution code, reference code, hidden checks.

`secrets()` lists, from the full package, what must never reach a student:

- **solutions**: the body of every function, method and class of every reference solution
  (the course's `solutions/`, subfolders included), unless a stub has the same code (a bug hunt's
  stub is its solution with faults injected: what they share is no secret);
- **references**: the bodies of the grader-side reference modules (`checks/*_reference.py`)
  and their distinctive statements (those found in no file a release ships by design);
- **hidden checks**: every hidden check's function name and id, the bodies of the functions in
  hidden check files and in the helpers only they use (`checks/*_hidden.py`), and their
  distinctive statements (a hidden check's inputs and values).

Bodies and statements shorter than `MIN_WORDS` words are left out: `return a.T` is no secret
worth the name, and would match any hint.

`scan(root, secrets)` reads every file under `root`, and every member of every zip or wheel in it
(recursively), three ways:

- **words**: the text as a sequence of words (identifiers, numbers and single symbols; comments
  of Python code dropped; quotes ignored), searched for each secret's sequence, so whitespace,
  line breaks, comments or a change of quotes cannot hide a copy; a notebook or JSON file is
  read as the strings it holds (the text of code cells, escaped in JSON, included);
- **shapes**: the syntax tree of every function and class in Python code (files, notebook
  cells, strings of JSON) compared with the secrets' trees, so a reformatted copy is found;
- **names**: hidden check names and ids, as whole words.
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
import warnings
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

MIN_WORDS = 10
MIN_STATEMENT_WORDS = 8
TEXT_SUFFIXES = {".py", ".ipynb", ".json", ".toml", ".md", ".txt", ".cfg", ".ini", ".j2", ".css",
                 ".html", ".csv", ".yaml", ".yml", ".sh", ".in", ""}
ARCHIVE_SUFFIXES = {".zip", ".whl"}
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|[^\sA-Za-z0-9_'\"]")
SEP = "\x00"


@dataclass(frozen=True)
class Secret:
    kind: str            # "solution", "reference", "hidden check"
    origin: str          # where it comes from, e.g. "solutions/c.py: c_strides"
    words: str = ""      # a word sequence (joined by SEP), searched for
    shape: str = ""      # ast.dump of a body, compared with the functions of Python code
    name: str = ""       # searched as a whole word


@dataclass(frozen=True)
class Leak:
    path: str            # relative to the scanned root; "a.whl!grader/x.py" inside an archive
    secret: Secret
    how: str             # "words", "shape" or "name"

    def __str__(self) -> str:
        return f"{self.path}: {self.secret.kind} {self.secret.origin} ({self.how})"

    @property
    def allowed(self) -> str | None:
        """Why this one is shipped on purpose, or None (it must not be)."""
        inner = self.path.rpartition("!")[2]
        for (origin, path), reason in ALLOWED.items():
            if self.secret.origin == origin and inner.endswith(path):
                return reason
        return None


# Code a release ships on purpose although a solution has it too: (secret, file) -> why.
ALLOWED = {
    ("solutions/training_loops.py: set_seed", "grader/probes/training_loops.py"):
        "the train_classifier probe (which runs in the worker, so it ships) seeds the same "
        "three generators; the contract of set_seed names them one by one",
}


# --------------------------------------------------------------------------- text as words


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def joined(ws: list[str]) -> str:
    return SEP + SEP.join(ws) + SEP


def without_comments(source: str) -> str:
    """Python source with its comments blanked out (lines kept); unparsable text unchanged."""
    lines = source.splitlines(keepends=True)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return source
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            row, start = tok.start
            _, end = tok.end
            line = lines[row - 1]
            lines[row - 1] = line[:start] + " " * (end - start) + line[end:]
    return "".join(lines)


def _segment(lines: list[str], nodes: list[ast.stmt]) -> str:
    first, last = nodes[0], nodes[-1]
    chunk = lines[first.lineno - 1:last.end_lineno]
    chunk[-1] = chunk[-1][:last.end_col_offset] if len(chunk) > 1 else \
        chunk[-1][first.col_offset:last.end_col_offset]
    if len(chunk) > 1:
        chunk[0] = chunk[0][first.col_offset:]
    return "\n".join(chunk)


def _body(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> list[ast.stmt]:
    body = list(node.body)
    return body[1:] if body and _is_docstring(body[0]) else body


def shape_of(body: list[ast.stmt]) -> str:
    return ast.dump(ast.Module(body=body, type_ignores=[]), include_attributes=False)


def definitions(source: str) -> Iterator[tuple[str, list[ast.stmt], str]]:
    """(qualified name, body without docstring, body's comment-free source) of every function
    and class in `source`, nested ones included."""
    clean = without_comments(source)
    tree = ast.parse(clean)
    lines = clean.splitlines()

    def visit(node: ast.AST, prefix: str):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                body = _body(child)
                if body:
                    yield name, body, _segment(lines, body)
                yield from visit(child, f"{name}.")
            else:
                yield from visit(child, prefix)

    yield from visit(tree, "")


def statements(source: str) -> Iterator[str]:
    """The comment-free source of every simple (not compound) statement in `source`."""
    clean = without_comments(source)
    lines = clean.splitlines()
    for node in ast.walk(ast.parse(clean)):
        if isinstance(node, ast.stmt) and not hasattr(node, "body") and \
                not isinstance(node, (ast.Import, ast.ImportFrom)) and not _is_docstring(node):
            yield _segment(lines, [node])


def _is_docstring(node: ast.stmt) -> bool:
    """A string on its own: a docstring (a check's title is meant to be shown)."""
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and \
        isinstance(node.value.value, str)


# --------------------------------------------------------------------------- secrets


def secrets() -> list[Secret]:
    """Everything a student release of the active course must not contain."""
    from grader.checking.recorded import SUFFIX
    from grader.course.folder import active_course
    from grader.course.registry import visibility_of_file

    course = active_course()
    exercises, solutions, checks_dir = course.exercises_dir, course.solutions_dir, course.checks_dir
    public = _public_corpus(exercises, checks_dir)
    found: list[Secret] = []
    # Code a stub has ships anyway: a bug hunt's stub is its solution with faults injected, and
    # one bug hunt's correct function may be another's faulty one. (Whether that hands one bug
    # hunt's fix to another is for the author of the bug hunts to judge, not this scan.)
    stub_words = SEP.join(joined(words(without_comments(p.read_text(encoding="utf-8"))))
                          for p in sorted(exercises.rglob("*.py")))
    for path in sorted(solutions.rglob("*.py")):
        if path.name == "__init__.py" or "__pycache__" in path.parts:
            continue
        rel = path.relative_to(solutions)
        found += _body_secrets("solution", f"solutions/{rel.as_posix()}",
                               path.read_text(encoding="utf-8"), exclude=stub_words)
    for path in sorted(checks_dir.glob(f"*{SUFFIX}.py")):
        source = path.read_text(encoding="utf-8")
        found += _body_secrets("reference", f"checks/{path.name}", source)
        found += _statement_secrets("reference", f"checks/{path.name}", source, public)
    # Hidden check files and the helpers only they may import (`*_hidden.py`: their inputs).
    for path in sorted(checks_dir.glob("*.py")):
        if visibility_of_file(path) != "hidden":
            continue
        source = path.read_text(encoding="utf-8")
        origin = f"checks/{path.name}"
        found += _body_secrets("hidden check", origin, source)
        found += _statement_secrets("hidden check", origin, source, public)
    found += _hidden_names(public)
    return found


def _body_secrets(kind: str, origin: str, source: str, exclude: str = "") -> list[Secret]:
    out = []
    for name, body, text in definitions(source):
        ws = words(text)
        if len(ws) < MIN_WORDS or (exclude and joined(ws) in exclude):
            continue
        out.append(Secret(kind, f"{origin}: {name}", words=joined(ws), shape=shape_of(body)))
    return out


def _statement_secrets(kind: str, origin: str, source: str, public: str) -> list[Secret]:
    out, seen = [], set()
    for text in statements(source):
        ws = joined(words(text))
        if len(words(text)) < MIN_STATEMENT_WORDS or ws in public or ws in seen:
            continue
        seen.add(ws)
        first = text.strip().splitlines()[0][:60]
        out.append(Secret(kind, f"{origin}: `{first}`", words=ws))
    return out


def _hidden_names(public: str) -> list[Secret]:
    from grader.checking.selection import collect_checks

    checks = collect_checks()
    # A name a visible check bears ships by design (its file, faults.toml, reports): a hidden
    # check of another exercise with the same name gives nothing away by it.
    shipped = {n for found in checks if found.info.visibility != "hidden"
               for n in (found.name, found.name.removeprefix("test_"))}
    out = []
    for found in checks:
        if found.info.visibility != "hidden":
            continue
        origin = f"{found.id} ({found.info.title})"
        bare = found.name.removeprefix("test_")
        names = [found.name, found.id]
        if len(bare) >= 12 and joined([bare]) not in public:
            names.append(bare)
        out += [Secret("hidden check", origin, name=n) for n in names if n not in shipped]
    return out


def _public_corpus(exercises: Path, checks_dir: Path) -> str:
    """Words of what a release ships by design: stubs, visible checks, their helpers, probes,
    the grader's own modules. A statement found there is no hidden check's secret."""
    import grader
    from grader.checking.recorded import SUFFIX
    from grader.course.registry import visibility_of_file

    grader_dir = Path(grader.__file__).resolve().parent
    texts = [p.read_text(encoding="utf-8") for p in sorted(exercises.rglob("*.py"))]
    texts += [p.read_text(encoding="utf-8") for p in sorted(grader_dir.rglob("*.py"))
              if "curriculum" not in p.relative_to(grader_dir).parts]
    texts += [p.read_text(encoding="utf-8") for p in sorted(checks_dir.glob("*.py"))
              if visibility_of_file(p) != "hidden" and not p.stem.endswith(SUFFIX)]
    return SEP.join(joined(words(without_comments(t))) for t in texts)


# --------------------------------------------------------------------------- scanning


@dataclass(frozen=True)
class Text:
    path: str
    text: str              # what the words are read from (comments of Python code dropped)
    code: tuple[str, ...]  # Python sources in it (a .py file, notebook cells, JSON strings)
    raw: str               # the text as it is, where names are looked for


def texts(root: Path) -> Iterator[Text]:
    """Every file under `root` as text, archives opened (recursively); binary files yield
    their path with no text, so that a scan can refuse them."""
    for path in sorted(p for p in Path(root).rglob("*") if p.is_file()):
        yield from _read(path.relative_to(root).as_posix(), path.read_bytes())


def _read(name: str, data: bytes) -> Iterator[Text]:
    suffix = PurePosixPath(name).suffix
    if suffix in ARCHIVE_SUFFIXES or data[:4] == b"PK\x03\x04":
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for member in archive.infolist():
                if not member.is_dir():
                    yield from _read(f"{name}!{member.filename}", archive.read(member))
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        yield Text(name, "", (), "")
        return
    if suffix == ".py":
        yield Text(name, without_comments(text), (text,), text)
    elif suffix in (".ipynb", ".json"):
        try:
            strings = list(_strings(json.loads(text)))
        except ValueError:
            yield Text(name, text, (), text)
            return
        yield Text(name, "\n".join(without_comments(s) for s in strings), tuple(strings),
                   "\n".join(strings) + "\n" + text)
    else:
        yield Text(name, text, (), text)


def _strings(value) -> Iterator[str]:
    """Every string in a JSON value; a notebook cell's list of lines as one string."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        if value and all(isinstance(v, str) for v in value):
            yield "".join(value)
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)


def _shapes(code: tuple[str, ...]) -> set[str]:
    out = set()
    for source in code:
        try:
            with warnings.catch_warnings():  # strings that are not code warn of escapes
                warnings.simplefilter("ignore")
                out |= {shape_of(body) for _, body, _ in definitions(source)}
        except (SyntaxError, ValueError, RecursionError):
            continue
    return out


def scan(root: Path, secrets: list[Secret]) -> tuple[list[Leak], list[str]]:
    """Leaks of `secrets` in the files under `root`, and the files that could not be read as
    text (a release should have none)."""
    leaks: list[Leak] = []
    unreadable: list[str] = []
    by_shape: dict[str, list[Secret]] = {}
    for s in secrets:
        if s.shape:
            by_shape.setdefault(s.shape, []).append(s)
    names = [(s, re.compile(rf"(?<![A-Za-z0-9_]){re.escape(s.name)}(?![A-Za-z0-9_])"))
             for s in secrets if s.name]
    for item in texts(root):
        if not item.raw:
            if not item.path.endswith(("__init__.py", "py.typed")):
                unreadable.append(item.path)
            continue
        hay = joined(words(item.text))
        found = {}
        for s in secrets:
            if s.words and s.words in hay:
                found[s] = "words"
        for shape in _shapes(item.code) & by_shape.keys():
            for s in by_shape[shape]:
                found.setdefault(s, "shape")
        for s, pattern in names:
            if pattern.search(item.raw):
                found.setdefault(s, "name")
        leaks += [Leak(item.path, s, how) for s, how in found.items()]
    return leaks, unreadable
