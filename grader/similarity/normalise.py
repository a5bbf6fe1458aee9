"""One exercise file as the token sequence its similarity is measured on.

What a copy changes without changing the work is taken out before fingerprinting:

- comments, docstrings (and any other statement that is only a string), print statements,
  blank lines, line breaks inside brackets, grouping parentheses, trailing commas, quote
  styles, number spellings, type annotations and keyword-argument names;
- the names the student chose: every name the file binds (its helpers, parameters, locals,
  loop variables, attributes it assigns) becomes `‹1›`, `‹2›`... in order of first use within
  its top-level statement; the exercise's own names (those the stub defines: the contract)
  and everything imported keep theirs, imported names as what they import (`np.mean` and a
  `mean` imported from numpy are both `numpy . mean`), so `torch.einsum` stays itself while
  `x`/`inputs` do not matter;
- the order of top-level statements and of a class's methods: they are sorted by their
  normalised text (each numbers its names on its own).

The student's text is hostile: it is parsed only under `MAX_BYTES` (`ast.parse` costs a few
hundred bytes per byte of source), the tokenizer and parser's every error becomes a note, and
nothing here is executed. Each token keeps the line it came from, so that a page can show the
original lines that matched.
"""

from __future__ import annotations

import ast
import bisect
import hashlib
import io
import keyword
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass, field

# A file over this many characters is not compared (a note says so): parsing costs ~650 bytes
# per byte (grader.intake.submission.PRECHECK_BYTES, the same bound), and no exercise's honest
# solution comes near it (the largest shipped solution is under 12 kB).
MAX_BYTES = 256 << 10
# Canonical texts of string literals are kept up to this many characters (a longer literal is
# one token "S…" plus its digest: equal text, equal token).
MAX_LITERAL = 80

_SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER}
_CLOSING = {")", "]", "}"}


@dataclass
class Tokens:
    """A file's normalised tokens (`text[i]`), the original line of each (`lines[i]`, 1-based,
    in the text the file was read as), and why it could not be normalised (`problem`)."""

    text: list[str] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    problem: str | None = None


def normalised(source: str, *, contract: Iterable[str] = ()) -> Tokens:
    """`source` as normalised tokens (see the module's doc); `contract`: the names the stub
    defines at its top level, kept as they are. Never raises: a file that cannot be parsed or
    tokenized, or is over `MAX_BYTES`, gives no tokens and a `problem`."""
    if len(source) > MAX_BYTES:
        return Tokens(problem=f"larger than {MAX_BYTES >> 10} kB: not compared")
    try:
        tree = ast.parse(source)
        raw = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (SyntaxError, ValueError, RecursionError, MemoryError, tokenize.TokenError) as exc:
        return Tokens(problem=f"does not parse ({type(exc).__name__}): not compared")
    names = _Names(set(contract))
    try:
        names.visit(tree)
    except RecursionError:
        return Tokens(problem="nested too deeply to compare: not compared")
    starts = _units(tree)
    statements: list[Tokens] = [Tokens() for _ in starts] or [Tokens()]
    dropped = _Spans(names.dropped)
    numbering: list[dict[str, str]] = [{} for _ in statements]
    previous, where = "", 0
    before: tokenize.TokenInfo | None = None  # the token before this one (comments aside)
    parens: list[str] = []  # what each open "(" is: "call" (or a def's) or "group"
    significant = [tok for tok in raw if tok.type not in _SKIPPED]
    for k, tok in enumerate(significant):
        ahead = significant[k + 1].string if k + 1 < len(significant) else ""
        prior, before = before, tok
        if tok.type not in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            # (a line end, indent or dedent closes the statement before it: a dedent's
            # position is the next statement's first token)
            where = max(bisect.bisect_right(starts, tok.start) - 1, 0)
        out, own = statements[where], numbering[where]
        if dropped.holds(tok.start):
            if dropped.opens(tok.start) and out.text and out.text[-1] in (":", "->"):
                out.text.pop()  # the ":" of an annotated argument, the "->" of a return type
                out.lines.pop()
            continue
        if tok.type == tokenize.OP and tok.string == "(":
            # (a call's, a def's, a class's, a subscript's call: after a name, a bracket or a
            # string; else parentheses that only group, which layout adds and removes)
            called = prior is not None and (
                prior.type == tokenize.NAME and not keyword.iskeyword(prior.string)
                or prior.string in (")", "]") or prior.type == tokenize.STRING)
            parens.append("call" if called else "group")
            if not called:
                continue
        elif tok.type == tokenize.OP and tok.string == ")":
            if (parens.pop() if parens else "call") == "group":
                continue
        if tok.type == tokenize.NAME and ahead == "=" and parens and parens[-1] == "call" \
                and previous in ("(", ","):
            # a keyword argument: one placeholder for all (the student may have named it,
            # as a helper's parameter, and a call's keywords come in any order)
            text = PLACEHOLDER
        else:
            text = _canonical(tok, previous, names, own)
        previous = tok.string if tok.type != tokenize.NEWLINE else ""
        if text == "⏎" and (not out.text or out.text[-1] in ("⏎", "⇥", "⇤")):
            continue  # the line end of a dropped docstring, of a blank statement
        if text == "⇤" and out.text and out.text[-1] == "⇤":
            continue  # blocks closing at once are one dedent: the last method closes its class
        if text in _CLOSING and out.text and out.text[-1] == ",":
            out.text.pop()  # a trailing comma is formatting
            out.lines.pop()
        if tok.type == tokenize.NAME and text != tok.string and "." in text:
            pieces = text.replace(".", " . ").split()  # an import: `F` is torch . nn . functional
        else:
            pieces = [text]
        out.text += pieces
        out.lines += [tok.start[0]] * len(pieces)
    result = Tokens()
    for statement in sorted(statements, key=lambda s: s.text):
        result.text += statement.text
        result.lines += statement.lines
    return result


def _canonical(tok: tokenize.TokenInfo, previous: str, names: _Names,
               own: dict[str, str]) -> str:
    """The normalised text of one token."""
    kind, text = tok.type, tok.string
    if kind == tokenize.NEWLINE or (kind == tokenize.OP and text == ";"):
        return "⏎"
    if kind == tokenize.INDENT:
        return "⇥"
    if kind == tokenize.DEDENT:
        return "⇤"
    if kind == tokenize.STRING or kind == getattr(tokenize, "FSTRING_MIDDLE", -1):
        return _literal(text)
    if kind == tokenize.NUMBER:
        return _number(text)
    if kind != tokenize.NAME:
        return text
    if keyword.iskeyword(text):
        return text
    if previous == ".":  # an attribute: the student's own only if the file assigns it
        return _placeholder("." + text, own) if text in names.attributes else text
    if text in names.imported:
        return names.imported[text]
    if text in names.bound:
        return _placeholder(text, own)
    return text


PLACEHOLDER = "‹›"  # a name the student chose, in `loose` tokens (`‹1›`, `‹2›`... otherwise)


def _placeholder(name: str, own: dict[str, str]) -> str:
    return own.setdefault(name, f"‹{len(own) + 1}›")


def loose(tokens: list[str]) -> list[str]:
    """`tokens` with every name the student chose as one and the same placeholder: what the
    starter code is recognised by, wherever its names fall in the numbering of a function."""
    return [PLACEHOLDER if t.startswith("‹") else t for t in tokens]


def _number(text: str) -> str:
    """A number as its value reads (`1e-6`, `1e-06` and `0.000001` are one)."""
    if len(text) > 100:
        return text
    for kind in (_integer, float, complex):
        try:
            return repr(kind(text))
        except (ValueError, OverflowError):
            continue
    return text


def _integer(text: str) -> int:
    return int(text, 0)


def _literal(text: str) -> str:
    """A string literal's value, however it is quoted or escaped (an f-string: its text)."""
    body = text.lstrip("rRbBuUfF")
    prefix = text[:len(text) - len(body)].lower().replace("u", "")
    for quote in ('"""', "'''", '"', "'"):
        if body.startswith(quote) and body.endswith(quote) and len(body) >= 2 * len(quote):
            body = body[len(quote):-len(quote)]
            break
    if "f" in prefix:  # the names inside an f-string's fields are the student's: left out
        body = _without_fields(body)
    elif "\\" in body:  # escapes: the value, however they are written
        try:  # (linear in the literal's length; nothing is evaluated but the literal)
            value = ast.literal_eval(text)
            body = value if isinstance(value, str) else repr(value)
            prefix = prefix.replace("r", "")
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            pass
    if len(body) > MAX_LITERAL:
        body = "…" + hashlib.blake2b(body.encode("utf-8", "replace"),
                                     digest_size=8).hexdigest()
    return f"{prefix}S:{body}"


def _without_fields(body: str) -> str:
    """An f-string's text with each replacement field as `{}` (`{{` and `}}` kept)."""
    out, depth, i = [], 0, 0
    while i < len(body):
        ch = body[i]
        if depth == 0 and ch in "{}" and body[i:i + 2] in ("{{", "}}"):
            out.append(body[i:i + 2])
            i += 2
            continue
        if ch == "{":
            depth += 1
            if depth == 1:
                out.append("{}")
        elif ch == "}" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
        i += 1
    return "".join(out)


def _first_line(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno] + [d.lineno for d in decorators])


def _units(tree: ast.Module) -> list[tuple[int, int]]:
    """Where each unit that is numbered and sorted on its own starts: every top-level
    statement, and every method of a top-level class (methods are reordered as functions are).
    A token belongs to the last unit that starts at or before it."""
    starts = []
    for node in tree.body:
        starts.append((_first_line(node), 0))
        if isinstance(node, ast.ClassDef):
            starts += [(_first_line(m), m.col_offset) for m in node.body
                       if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return sorted(starts)


class _Spans:
    """Source spans of tokens to drop (docstrings, bare strings, annotations), looked up by a
    token's start in O(log n)."""

    def __init__(self, spans: list[tuple[tuple[int, int], tuple[int, int]]]):
        merged: list[tuple[tuple[int, int], tuple[int, int]]] = []
        for start, end in sorted(spans):
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        self.starts = [s for s, _ in merged]
        self.ends = [e for _, e in merged]

    def holds(self, at: tuple[int, int]) -> bool:
        i = bisect.bisect_right(self.starts, at) - 1
        return i >= 0 and at < self.ends[i]

    def opens(self, at: tuple[int, int]) -> bool:
        i = bisect.bisect_left(self.starts, at)
        return i < len(self.starts) and self.starts[i] == at


class _Names(ast.NodeVisitor):
    """What a module binds (its own names), the attributes it assigns, what its imports name,
    and the spans of its docstrings, bare strings and annotations."""

    def __init__(self, contract: set[str]):
        self.contract = contract
        self.bound: set[str] = set()
        self.attributes: set[str] = set()
        self.imported: dict[str, str] = {}
        self.dropped: list[tuple[tuple[int, int], tuple[int, int]]] = []

    def _bind(self, name: str | None) -> None:
        if name and name not in self.contract:
            self.bound.add(name)

    def _drop(self, node: ast.AST | None) -> None:
        if node is not None and getattr(node, "end_lineno", None) is not None:
            self.dropped.append(((node.lineno, node.col_offset),  # type: ignore[attr-defined]
                                 (node.end_lineno, node.end_col_offset)))  # type: ignore[attr-defined]

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            self._drop(node)  # a docstring, or a string left as a statement: prose
        elif isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name) \
                and node.value.func.id == "print":
            self._drop(node)  # a print of its own: debugging, or padding between lines
        else:
            self.generic_visit(node)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._bind(node.name)
        self._drop(node.returns)
        self.generic_visit(node)

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._bind(node.name)
        self.generic_visit(node)

    def visit_arg(self, node: ast.arg) -> None:
        self._bind(node.arg)
        self._drop(node.annotation)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._drop(node.annotation)
        self.visit(node.target)
        if node.value is not None:
            self.visit(node.value)

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load):
            self._bind(node.id)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if not isinstance(node.ctx, ast.Load):
            self.attributes.add(node.attr)
        self.generic_visit(node)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        self._bind(node.name)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        for name in node.names:
            self._bind(name)

    visit_Nonlocal = visit_Global  # type: ignore[assignment]

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            local = alias.asname or alias.name.partition(".")[0]
            self.imported[local] = alias.name if alias.asname else local

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            local = alias.asname or alias.name
            self.imported[local] = f"{node.module or ''}.{alias.name}".lstrip(".")


def contract_names(stub: str) -> set[str]:
    """The names a stub defines (its functions, classes and their methods, its top-level
    constants): the exercise's contract, the same in every submission, kept as they are."""
    try:
        tree = ast.parse(stub)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    found = {node.name for node in ast.walk(tree)
             if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found |= {t.id for t in targets if isinstance(t, ast.Name)}
    return found


def docstring_code(stub: str) -> list[str]:
    """The code a stub's docstrings show (worked examples, `>>>` lines, the lines of code a
    contract spells out): each fragment that parses as Python, and is more than a name or a
    value, is starter code too. The stub is the course's, not a student's."""
    try:
        tree = ast.parse(stub)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    fragments: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef,
                                 ast.ClassDef)):
            continue
        doc = ast.get_docstring(node) or ""
        for line in doc.splitlines():
            text = line.strip().removeprefix("- ").removeprefix("* ")
            text = text.removeprefix(">>> ").removeprefix("... ")
            candidates = [text]
            head, colon, rest = text.partition(":  ")  # `"case":    y = f(x); L = y.sum()`
            if colon:
                candidates.append(rest.strip())
            candidates += [p.strip().rstrip(".") for c in list(candidates)
                           for p in c.replace("; ", ", ").split(", ")]
            for candidate in dict.fromkeys(candidates):
                # (prose may lead in: "Start from xl = x.detach().clone()")
                words = candidate.split()
                for drop in range(min(len(words), MAX_LEAD_WORDS + 1)):
                    code = " ".join(words[drop:])
                    if _is_code(code):
                        fragments.append(code)
                        break
    return fragments


MAX_LEAD_WORDS = 6  # words of prose before a docstring's code, in `docstring_code`


def _is_code(text: str) -> bool:
    try:
        body = ast.parse(text).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return bool(body) and not all(isinstance(n, ast.Expr) and isinstance(
        n.value, (ast.Name, ast.Constant)) for n in body)
