"""Look for answers in a folder (a student release): solution code, reference code, hidden checks.

`secrets()` lists, from the full package, what must never reach a student:

- **solutions**: the body of every function, method and class of every reference solution
  (the course's `solutions/`, subfolders included), unless a stub provides it as code: a
  definition of the same name whose code holds it (a bug hunt's stub is its solution with faults
  injected, a module's stub may give a method such as `Model.__repr__` ready-made: what they
  share is no secret). A stub's code is what the syntax tree holds without docstrings, comments
  or the text of string literals (`code_words`): a solution pasted into a stub's docstring, a
  comment or a string is no licence, it is a leak;
- **references**: the bodies of the grader-side reference modules (`checks/*_reference.py`)
  and their distinctive statements (those found in no file a release ships by design);
- **hidden checks**: every hidden check's function name and id, the bodies of the functions in
  hidden check files and in the helpers only they use (`checks/*_hidden.py`), and their
  distinctive statements (a hidden check's inputs and values).

A reference's or hidden check's statement is no secret when the grader's own modules have it
as code, or, for a statement that holds no data (fewer than `DATA_NUMBERS` numbers: a call, an
assertion, a message), when the stubs or the visible checks and their helpers have it: they share
such idioms with the hidden checks. A statement holding data (inputs, expected values) stays a
secret even if a stub or a visible check has it: the course's shipped files are what is scanned,
so they cannot vouch for themselves (`Public`). A hidden check's bare name (without `test_`) is
no secret only when the grader or a stub has it as an identifier in code.

Bodies and statements shorter than `MIN_WORDS` words are left out: `return a.T` is no secret
worth the name, and would match any hint.

`scan(root, secrets)` reads every file under `root`, and every member of every zip or wheel in it
(recursively), three ways:

- **words**: the text as a sequence of words (identifiers, numbers and single symbols; comments
  of Python code dropped; quotes ignored), searched for each secret's sequence, so whitespace,
  line breaks, comments or a change of quotes cannot hide a copy; a notebook or JSON file is
  read as the strings it holds (the text of code cells, escaped in JSON, included); the text of
  the comments of Python code is searched too, on its own, so that commented-out code is found,
  and the text with its markdown escapes undone (a notebook's markdown, `result = \\[\\]`);
- **shapes**: the syntax tree of every function and class in Python code (files, notebook
  cells, strings of JSON) compared with the secrets' trees, so a reformatted copy is found;
- **names**: hidden check names and ids, as whole words.
"""

from __future__ import annotations

import ast
import copy
import hashlib
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
DATA_NUMBERS = 3  # a statement with this many number literals holds data (inputs, values)
ARCHIVE_SUFFIXES = {".zip", ".whl"}
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|[^\sA-Za-z0-9_'\"]")
SEP = "\x00"


@dataclass(frozen=True)
class Secret:
    kind: str            # "solution", "reference", "hidden check"
    origin: str          # where it comes from, e.g. "solutions/m.py: softmax_rows"
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
        """Why this one is shipped on purpose (the course's `[[shipped_on_purpose]]`), or None
        (it must not be)."""
        from grader.course.folder import active_course

        inner = self.path.rpartition("!")[2]
        for entry in active_course().shipped_on_purpose:
            if self.secret.origin == entry.secret and inner.endswith(entry.file):
                return entry.reason
        return None


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
    for _, text in statement_nodes(source):
        yield text


def statement_nodes(source: str) -> Iterator[tuple[ast.stmt, str]]:
    """Every simple (not compound) statement of `source` but imports and docstrings, with its
    comment-free source."""
    clean = without_comments(source)
    lines = clean.splitlines()
    for node in ast.walk(ast.parse(clean)):
        if isinstance(node, ast.stmt) and not hasattr(node, "body") and \
                not isinstance(node, (ast.Import, ast.ImportFrom)) and not _is_docstring(node):
            yield node, _segment(lines, [node])


_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


def unescaped(text: str) -> str:
    """`text` without the backslashes that escape punctuation (markdown's `\\[`, `\\_`)."""
    return _ESCAPE.sub(r"\1", text)


def comment_text(source: str) -> str:
    """The text of the comments of Python `source` without their `#`, one a line ("" for text
    that cannot be tokenized)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return ""
    return "\n".join(t.string.lstrip("#") for t in tokens if t.type == tokenize.COMMENT)


class _AsCode(ast.NodeTransformer):
    """A tree cut down to its code: a string on its own (a docstring) becomes `pass`, a string
    literal or f-string one opaque name standing for its value, so that no text inside a string
    can pass for code."""

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        return ast.Pass() if _is_docstring(node) else self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if isinstance(node.value, (str, bytes)):
            return ast.Name(id=_opaque(repr(node.value)), ctx=ast.Load())
        return node

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:
        return ast.Name(id=_opaque(ast.dump(node)), ctx=ast.Load())


def _opaque(text: str) -> str:
    return "__string_" + hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def code_words(nodes: list[ast.stmt]) -> str:
    """The words (joined) of `nodes` as code, as the syntax tree has it: no comments, no
    docstrings, each string literal one word, the spelling normalised (`ast.unparse`)."""
    tree = _AsCode().visit(ast.Module(body=copy.deepcopy(nodes), type_ignores=[]))
    return joined(words(ast.unparse(tree)))


def module_code_words(source: str) -> str:
    """`code_words` of a whole module ("" if it does not parse)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return code_words(ast.parse(source).body)
    except (SyntaxError, ValueError, RecursionError):
        return ""


def holds_data(node: ast.AST) -> bool:
    """Whether a statement holds data: at least `DATA_NUMBERS` number literals (a hidden
    check's inputs or expected values, a table of cases), not just a call or a message."""
    numbers = sum(1 for n in ast.walk(node) if isinstance(n, ast.Constant)
                  and isinstance(n.value, (int, float, complex)) and not isinstance(n.value, bool))
    return numbers >= DATA_NUMBERS


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
    public = _public_corpus(exercises, checks_dir, course.probes_dir)
    # Code a stub provides ships anyway: a bug hunt's stub is its solution with faults injected
    # (and one bug hunt's correct function may be another's faulty one), a module's stub may
    # give a method ready-made. Only code counts, under the same name: not a docstring.
    provided = provided_code(exercises)
    found: list[Secret] = []
    for path in sorted(solutions.rglob("*.py")):
        if path.name == "__init__.py" or "__pycache__" in path.parts:
            continue
        rel = path.relative_to(solutions)
        found += _body_secrets("solution", f"solutions/{rel.as_posix()}",
                               path.read_text(encoding="utf-8"), provided=provided)
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


def provided_code(exercises: Path) -> dict[str, set[str]]:
    """What the stubs under `exercises` give students as code: the qualified name of each of
    their functions, methods and classes -> the `code_words` of its bodies."""
    out: dict[str, set[str]] = {}
    for path in sorted(exercises.rglob("*.py")):
        for name, body, _ in definitions(path.read_text(encoding="utf-8")):
            out.setdefault(name, set()).add(code_words(body))
    return out


def _body_secrets(kind: str, origin: str, source: str,
                  provided: dict[str, set[str]] | None = None) -> list[Secret]:
    out = []
    for name, body, text in definitions(source):
        ws = words(text)
        if len(ws) < MIN_WORDS:
            continue
        if provided and name in provided:
            code = code_words(body)
            if any(code in given for given in provided[name]):
                continue
        out.append(Secret(kind, f"{origin}: {name}", words=joined(ws), shape=shape_of(body)))
    return out


def _statement_secrets(kind: str, origin: str, source: str, public: Public) -> list[Secret]:
    out, seen = [], set()
    for node, text in statement_nodes(source):
        ws = joined(words(text))
        if len(words(text)) < MIN_STATEMENT_WORDS or ws in seen or public.vouches_for(node, text):
            continue
        seen.add(ws)
        first = text.strip().splitlines()[0][:60]
        out.append(Secret(kind, f"{origin}: `{first}`", words=ws))
    return out


def _hidden_names(public: Public) -> list[Secret]:
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
        # A bare name may be a function a stub defines (`test_softmax_rows`) or one of the
        # grader's identifiers; any other appearance (a visible helper's comment, a string) is
        # the hidden check's name given away.
        if len(bare) >= 12 and joined([bare]) not in public.identifiers:
            names.append(bare)
        out += [Secret("hidden check", origin, name=n) for n in names if n not in shipped]
    return out


@dataclass(frozen=True)
class Public:
    """What a release ships by design, as joined words, to tell a secret from what is no secret.

    - `grader`: the code (`code_words`) of the grader's own shipped modules, which ship whatever
      a course holds, and of the course's probes, which run in the worker and ship as the
      grader's did (instrumentation, no answers): it vouches for any statement;
    - `identifiers`: that code and the stubs' code: a hidden check's bare name found there is a
      function a student writes or one of the grader's names;
    - `idioms`: the words of the grader's modules, the stubs and the visible checks with their
      helpers (comments dropped). These are scanned themselves, so they cannot vouch for a
      statement that holds data (`holds_data`: a hidden check's inputs, a reference's values):
      only for calls, assertions and messages a visible check shares with a hidden one."""

    grader: str
    identifiers: str
    idioms: str

    def vouches_for(self, node: ast.stmt, text: str) -> bool:
        if code_words([node]) in self.grader:
            return True
        return not holds_data(node) and joined(words(text)) in self.idioms


# Folders of the grader package that never ship (in an installed wheel the shipped curriculum
# and the templates live inside it; the released course and the templates are written apart).
# `authoring` (new-exercise, verify) is for instructors only, and its scaffold's templates hold
# a whole exercise with its solution and hidden check: a course made with it would leak them.
# Here, not in build.py, since the scan reads what ships by design: build imports it from here.
NOT_SHIPPED = {"__pycache__", "curriculum", "templates", "authoring"}


def _public_corpus(exercises: Path, checks_dir: Path, probes_dir: Path) -> Public:
    """What a release ships by design (see `Public`)."""
    import grader
    from grader.checking.recorded import SUFFIX
    from grader.course.registry import visibility_of_file

    grader_dir = Path(grader.__file__).resolve().parent
    modules = [p.read_text(encoding="utf-8") for p in sorted(grader_dir.rglob("*.py"))
               if p.relative_to(grader_dir).parts[0] not in NOT_SHIPPED]
    modules += [p.read_text(encoding="utf-8") for p in sorted(probes_dir.glob("*.py"))]
    stubs = [p.read_text(encoding="utf-8") for p in sorted(exercises.rglob("*.py"))]
    visible = [p.read_text(encoding="utf-8") for p in sorted(checks_dir.glob("*.py"))
               if visibility_of_file(p) != "hidden" and not p.stem.endswith(SUFFIX)]
    code = SEP.join(module_code_words(t) for t in modules)
    return Public(grader=code,
                  identifiers=SEP.join([code, *(module_code_words(t) for t in stubs)]),
                  idioms=SEP.join(joined(words(without_comments(t)))
                                  for t in [*modules, *stubs, *visible]))


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
        # Commented-out code is searched as such, apart from the code around it, and text
        # with its markdown escapes undone (a docstring in a notebook's markdown: `x\[i\]`).
        hay = SEP.join([joined(words(item.text)), joined(words(unescaped(item.text))),
                        *(joined(words(comment_text(source))) for source in item.code)])
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
