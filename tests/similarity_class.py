"""A class for `torchgrade similarity`: independent correct solutions in different styles,
disguised copies of them, students who hand in the untouched stub. Used by
tests/test_similarity.py and benchmarks/bench_similarity.py (deterministic, no download).

Independent solutions are the course's reference solution and the correct solutions in other
styles of `tests/styles/` (written apart: plain loops, NumPy idioms, torch utilities...) and
`tests/similarity/` (recursion and functools, written for these tests). A
disguise is made with `ast` (never with the normaliser it is meant to fool): identifiers
renamed, top-level definitions reordered, the code reformatted, comments and docstrings
changed, or only some functions copied.
"""

from __future__ import annotations

import ast
import random
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STYLES = ROOT / "tests" / "styles"
SOLUTIONS = ROOT / "solutions"
STUBS = ROOT / "exercises"
# Written for these tests (full marks under `torchgrade check --hidden`, like tests/styles/),
# and a copy of one disguised by hand.
OWN = ROOT / "tests" / "similarity"
COPIED_BY_HAND = OWN / "copied_by_hand.py"

# Exercises with at least three independent correct solutions (the reference and two styles
# whose names do not start with "correct_": those are the reference with one line changed).
EXERCISES = ("strides_broadcasting", "training_loops", "parameters", "data_pipeline",
             "autograd_graph")


def independent_solutions(exercise: str) -> dict[str, str]:
    """style name -> source, for the independent correct solutions of `exercise`."""
    found = {"reference": (SOLUTIONS / f"{exercise}.py").read_text(encoding="utf-8")}
    for path in sorted([*STYLES.glob(f"{exercise}__*.py"), *OWN.glob(f"{exercise}__*.py")]):
        style = path.stem.split("__", 1)[1]
        if not style.startswith("correct_"):
            found[style] = path.read_text(encoding="utf-8")
    return found


def stub(exercise: str) -> str:
    return (STUBS / f"{exercise}.py").read_text(encoding="utf-8")


def contract(exercise: str) -> set[str]:
    tree = ast.parse(stub(exercise))
    return {n.name for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


# --------------------------------------------------------------------------- disguises

WORDS = ["data", "val", "res", "acc", "item", "cur", "tmp", "out", "buf", "arr", "num", "idx",
         "elem", "thing", "stuff", "piece", "part", "store", "hold", "seq"]


class _Renamer(ast.NodeTransformer):
    """Every name the module binds (but the contract's) renamed, consistently."""

    def __init__(self, keep: set[str], seed: int):
        self.keep, self.names, self.rng = keep, {}, random.Random(seed)

    def new(self, name: str) -> str:
        if name in self.keep or name.startswith("__") or name == "self":
            return name
        if name not in self.names:
            self.names[name] = f"{self.rng.choice(WORDS)}_{len(self.names)}"
        return self.names[name]

    def visit_arg(self, node):
        node.arg = self.new(node.arg)
        return node

    def visit_FunctionDef(self, node):
        node.name = self.new(node.name)
        self.generic_visit(node)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Name(self, node):
        if node.id in self.names or not isinstance(node.ctx, ast.Load):
            node.id = self.new(node.id)
        return node


def _bound(tree: ast.AST) -> set[str]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            out.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.add(n.name)
    return out


def renamed(source: str, keep: set[str], seed: int = 0) -> str:
    """Identifiers renamed (the contract's `keep` kept); the layout is ast.unparse's."""
    tree = ast.parse(source)
    renamer = _Renamer(keep, seed)
    for name in sorted(_bound(tree)):  # bind first, so loads before stores rename too
        renamer.new(name)
    return ast.unparse(renamer.visit(tree)) + "\n"


def reordered(source: str) -> str:
    """Top-level definitions in reverse order (imports and other statements first), and the
    methods of each class too."""
    tree = ast.parse(source)
    for cls in [n for n in tree.body if isinstance(n, ast.ClassDef)]:
        methods = [m for m in cls.body if isinstance(m, ast.FunctionDef)]
        rest = [m for m in cls.body if m not in methods]
        cls.body = rest + methods[::-1]
    source = ast.unparse(tree)
    tree = ast.parse(source)
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    rest = [n for n in tree.body if n not in defs]
    lines = source.splitlines()
    def text(n):
        start = min([n.lineno] + [d.lineno for d in getattr(n, "decorator_list", [])])
        return "\n".join(lines[start - 1:n.end_lineno])
    return "\n\n".join([text(n) for n in rest] + [text(n) for n in reversed(defs)]) + "\n"


def reformatted(source: str) -> str:
    """The layout changed: ast.unparse's (comments gone, quotes and parentheses its own), every
    argument list spread one per line with trailing commas, blank lines doubled."""
    out = []
    for line in ast.unparse(ast.parse(source)).splitlines():
        stripped = line.strip()
        indent = line[:len(line) - len(stripped)]
        if stripped.startswith("def ") and stripped.endswith(":") and ", " in stripped:
            head, _, rest = stripped.partition("(")
            args, _, tail = rest.rpartition(")")
            if "(" not in args and "'" not in args and '"' not in args:
                out.append(f"{indent}{head}(")
                out += [f"{indent}        {a.strip()}," for a in args.split(", ")]
                out.append(f"{indent}){tail}")
                continue
        out.append(line)
        if not stripped:
            out.append("")
    return "\n".join(out) + "\n"


def recommented(source: str) -> str:
    """Docstrings dropped or rewritten, comments added above returns and loops."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Module)) and node.body and \
                isinstance(node.body[0], ast.Expr) and \
                isinstance(getattr(node.body[0], "value", None), ast.Constant):
            node.body[0].value = ast.Constant("My own implementation, written from scratch.")
    out = []
    for line in ast.unparse(tree).splitlines():
        stripped = line.lstrip()
        indent = line[:len(line) - len(stripped)]
        if stripped.startswith(("return", "for ")):
            out.append(f"{indent}# here we {stripped.split()[0]} (I worked this out myself)")
        out.append(line)
    return "\n".join(out) + "\n"


def disguised(source: str, keep: set[str], seed: int = 0) -> str:
    """Every disguise at once: renamed, reordered, reformatted, re-commented."""
    return recommented(reformatted(reordered(renamed(source, keep, seed))))


def partly_copied(source: str, own: str, share: float = 0.5) -> str:
    """The first `share` of `source`'s function and class definitions (by their order in it),
    the rest as in `own` (the student's own work): a copy of part of the work."""
    src, mine = ast.parse(source), ast.parse(own)
    defs = [n for n in src.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    taken = {n.name for n in defs[:max(1, round(len(defs) * share))]}
    body = [n for n in mine.body if not (isinstance(n, (ast.FunctionDef, ast.ClassDef))
                                         and n.name in taken)]
    imports = [n for n in src.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    helpers = [n for n in src.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
               and n.name in taken]
    return ast.unparse(ast.Module(body=imports + body + helpers, type_ignores=[])) + "\n"


# --------------------------------------------------------------------------- a class


@dataclass(frozen=True)
class Student:
    sid: str
    files: dict[str, str]          # exercise -> source handed in
    copied_from: dict[str, tuple[str, ...]]  # exercise -> whose work this copies


def make_class(exercises: tuple[str, ...] = EXERCISES, *, copies: int = 1, stubs: int = 2,
               seed: int = 0) -> list[Student]:
    """One student per independent solution (style) of each exercise (`indep_<i>`: the i-th
    style of every exercise, so two of them never hand in one style), `copies` disguised
    copies of each kind per exercise (of a seeded choice of source), and `stubs` students
    with the untouched stubs."""
    rng = random.Random(seed)
    styles = {e: independent_solutions(e) for e in exercises}
    width = max(len(s) for s in styles.values())
    students: list[Student] = []
    for i in range(width):
        files = {e: list(s.values())[i] for e, s in styles.items() if i < len(s)}
        students.append(Student(f"indep_{i}", files, {}))
    kinds = ("renamed", "reordered", "reformatted", "recommented", "disguised", "partly",
             "patchwork")
    for n in range(copies):
        for kind in kinds:
            files: dict[str, str] = {}
            source_of: dict[str, tuple[str, ...]] = {}
            for e, s in styles.items():
                sources = list(s.values())
                i = rng.randrange(len(sources))
                src, keep = sources[i], contract(e)
                if kind == "renamed":
                    files[e] = renamed(src, keep, seed=n)
                elif kind == "reordered":
                    files[e] = reordered(src)
                elif kind == "reformatted":
                    files[e] = reformatted(src)
                elif kind == "recommented":
                    files[e] = recommented(src)
                elif kind == "disguised":
                    files[e] = disguised(src, keep, seed=n)
                elif kind == "partly":  # half copied, the rest not done (the stub's)
                    files[e] = renamed(partly_copied(src, stub(e)), keep, seed=n + 1)
                else:  # half of one classmate's, the rest another's
                    j = (i + 1) % len(sources)
                    files[e] = renamed(partly_copied(src, sources[j]), keep, seed=n + 2)
                    source_of[e] = (f"indep_{i}", f"indep_{j}")
                    continue
                source_of[e] = (f"indep_{i}",)
            students.append(Student(f"copy_{kind}_{n}", files, source_of))
    for n in range(stubs):
        students.append(Student(f"stub_{n}", {e: stub(e) for e in exercises}, {}))
    return students


def write_class(students: list[Student], root: Path) -> Path:
    """The class as a folder of student folders."""
    for s in students:
        home = root / s.sid
        home.mkdir(parents=True, exist_ok=True)
        for exercise, source in s.files.items():
            (home / f"{exercise}.py").write_text(source, encoding="utf-8")
    return root
