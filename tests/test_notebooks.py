"""Student notebooks: generated from the stubs, handed back in, graded like any notebook.

The notebooks are run in a real Jupyter kernel in test_kernel.py; here they are built, filled
with the reference solutions and submitted through `torchgrade grade`.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import nbformat
import pytest

from grader.outputs.writing import read_json
from grader.jupyter import check as jupyter_check
from grader.intake.notebook import is_check_cell, notebook_chunks
from grader.release.notebooks import (escape_markdown, exercise_notebook, fill_solutions,
                              module_parts,
                              module_path, solution_path, stub_path, visible_targets,
                              write_notebooks)
from grader.course.registry import known_exercises

ALL = known_exercises()
# Exercises whose stub raises NotImplementedError until filled in (a bug hunt's stub is a whole
# script with faults: it runs, and passes whatever its faults do not break).
TO_FILL = [e for e in ALL if "NotImplementedError" in stub_path(e).read_text()]


@pytest.fixture(scope="module")
def targets():
    return visible_targets(ALL)


def role(cell) -> str:
    return cell.metadata["torchgrade"]["role"]


def code_of(nb, *roles) -> str:
    return "\n\n".join(c.source for c in nb.cells if c.cell_type == "code" and role(c) in roles)


def top_level_names(source: str) -> set[str]:
    return {n.name for n in ast.parse(source).body
            if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


def plain(markdown: str) -> str:
    return markdown.replace("\\", "")


@pytest.mark.parametrize("exercise", ALL)
def test_notebook_is_the_stub_with_its_docstrings_as_markdown(exercise, targets):
    stub = stub_path(exercise).read_text()
    nb = exercise_notebook(exercise, checks=targets[exercise])
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    module_doc, parts = module_parts(stub)
    intro = nb.cells[0]
    assert role(intro) == "intro" and module_doc.splitlines()[0] in plain(intro.source)
    # The code cells together define what the stub defines, in the stub's order.
    code = code_of(nb, "code", "stub")
    assert [n for n in ast.parse(code).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    assert top_level_names(code) == top_level_names(stub)
    for part in (p for p in parts if p.name):
        doc = next(c for c in nb.cells if role(c) == "doc"
                   and c.metadata["torchgrade"].get("name") == part.name)
        # Contract and worked example come from the docstring, not retyped: the first line
        # (markdown-escaped) and every `>>>` line verbatim in a code block.
        if not part.doc:  # a bug hunt's helper may have none: the heading alone
            assert doc.source.strip().startswith("## `")
            continue
        assert part.doc.splitlines()[0] in plain(doc.source)
        for line in part.doc.splitlines():
            if line.strip().startswith(">>>"):
                assert line.strip() in doc.source and "```python" in doc.source
        stub_cell = next(c for c in nb.cells if role(c) == "stub"
                         and c.metadata["torchgrade"]["name"] == part.name)
        assert '"""' not in "".join(stub_cell.source.split("\n")[1:2])  # it is above
    # A check cell after every function with visible checks, and one for the whole exercise.
    checks = [c for c in nb.cells if role(c) == "check"]
    named = {c.metadata["torchgrade"].get("name") for c in checks}
    names = [p.name for p in parts if p.name]
    last = {max((t for t in check if t in names), key=names.index) for check in targets[exercise]}
    assert named == last | {None}
    assert all(is_check_cell(c.source) for c in checks)
    assert checks[-1].source.rstrip().endswith(f"check({exercise!r})")


def test_generating_twice_gives_identical_files(tmp_path):
    a = write_notebooks(tmp_path / "a", ALL)
    b = write_notebooks(tmp_path / "b", ALL)
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]


def test_a_script_stub_in_a_subfolder(tmp_path):
    """A bug hunt: an id like `bughunt_regression`, a stub in `bughunt/regression.py` that is a
    whole script (constants between functions, a main block)."""
    script = '''"""Regression with a hand-written loss.

The script trains a linear model. It holds 2 faults; `run()` returns the final loss.
"""

import torch

SEED = 0  # the data's seed


def make_data(n: int = 64):
    """Noisy points on a line.

    >>> x, y = make_data(4); x.shape
    torch.Size([4, 1])
    """
    g = torch.Generator().manual_seed(SEED)
    x = torch.randn(n, 1, generator=g)
    return x, 3 * x + 1


LR = 0.1


def run() -> float:
    """Train and return the final loss."""
    x, y = make_data()
    return float(((x - y) ** 2).mean())


if __name__ == "__main__":
    print(run())
'''
    folder = tmp_path / "bughunt"
    folder.mkdir()
    (folder / "regression.py").write_text(script)
    assert module_path("bughunt_regression", tmp_path) == folder / "regression.py"
    nb = exercise_notebook("bughunt_regression", source=script, checks=[["run"]])
    nbformat.validate(nb)
    code = code_of(nb, "code", "stub")
    assert "SEED = 0  # the data's seed" in code and "LR = 0.1" in code
    assert 'if __name__ == "__main__":' in code
    namespace: dict = {}
    exec(compile(code.replace('__name__ == "__main__"', "False"), "nb", "exec"), namespace)
    assert namespace["run"]() > 0
    assert [c.metadata["torchgrade"].get("name") for c in nb.cells if role(c) == "check"] == \
        ["run", None]


def test_markdown_escaping_keeps_code_spans():
    assert escape_markdown("a * b and `x_1 * y` cost $5") == r"a \* b and `x_1 * y` cost \$5"
    assert escape_markdown("# not a heading") == r"\# not a heading"


# --------------------------------------------------------------------------- graded notebooks


def filled(exercise: str, targets) -> nbformat.NotebookNode:
    nb = exercise_notebook(exercise, checks=targets[exercise])
    return fill_solutions(nb, solution_path(exercise).read_text())


@pytest.mark.parametrize("exercise", ALL)
def test_filled_notebook_holds_the_solution(exercise, targets):
    nb = filled(exercise, targets)
    code = code_of(nb, "code", "stub")
    assert top_level_names(solution_path(exercise).read_text()) <= top_level_names(code)
    assert "NotImplementedError" not in code


def as_student_would(nb: nbformat.NotebookNode) -> str:
    """The notebook after a student worked in it: magics, a shell line, and a scratch cell
    that raises after the definitions (and a cell magic that is not Python)."""
    nb = nbformat.from_dict(nb)
    nb.cells.insert(1, nbformat.v4.new_code_cell("%matplotlib inline\n!pip install numpy"))
    nb.cells.append(nbformat.v4.new_code_cell("%%bash\necho hello"))
    nb.cells.append(nbformat.v4.new_code_cell(
        "# scratch\nprint('trying')\nraise RuntimeError('unfinished scratch cell')"))
    return nbformat.writes(nb)


def test_notebooks_handed_back_score_full_marks_through_grade(tmp_path, targets):
    """A class: one student hands in the generated notebooks with the solutions filled in
    (check cells, magics, a raising scratch cell), one the untouched notebooks."""
    done, untouched = tmp_path / "class" / "ada", tmp_path / "class" / "ben"
    for exercise in ALL:
        (done / "hw").mkdir(parents=True, exist_ok=True)
        (done / "hw" / f"{exercise}.ipynb").write_text(as_student_would(filled(exercise, targets)))
        untouched.mkdir(parents=True, exist_ok=True)
        nb = exercise_notebook(exercise, checks=targets[exercise])
        (untouched / f"{exercise}.ipynb").write_text(nbformat.writes(nb))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "grader.cli", "grade", tmp_path / "class",
                           "--out", out, "-j", "2"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ada, ben = read_json(out / "ada" / "results.json"), read_json(out / "ben" / "results.json")
    assert {e.exercise for e in ada.exercises} == set(ALL)
    assert ada.score == ada.max_score > 0, [(c.id, c.message) for c in ada.checks
                                            if c.status != "passed"][:3]
    assert any(c.visibility == "hidden" for c in ada.checks)
    for part in ada.exercises:
        notes = " | ".join(part.notes)
        assert "IPython magic/shell line(s) removed" in notes
        assert "cell magic %%bash (not Python) was skipped" in notes
        assert "RuntimeError: unfinished scratch cell" in notes  # the report shows the error
        assert "trying" in part.output
    assert ben.max_score == ada.max_score
    unfilled = [c for c in ben.checks if c.exercise in TO_FILL]
    assert unfilled and all("not implemented yet" in c.message for c in unfilled)
    assert all(e.score == 0 for e in ben.exercises if e.exercise in TO_FILL)


def test_check_cells_are_not_graded():
    cells = [exercise_notebook("strides_broadcasting").cells[-1].source,
             "from grader.jupyter import check\ndef helper():\n    return 1\ncheck('x')",
             "x = 1"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    chunks, notes = notebook_chunks(nbformat.writes(nb), "n.ipynb")
    assert [c.code for c in chunks] == ["x = 1\n"]
    assert len(notes) == 1 and "cell 2 asks the grader to check your work" in notes[0]


def test_check_outside_jupyter_explains_itself(capsys):
    jupyter_check("strides_broadcasting")
    assert "torchgrade check strides_broadcasting.py" in capsys.readouterr().out


def test_notebooks_command_writes_student_notebooks_and_answer_keys(tmp_path):
    for extra, needle in (([], "NotImplementedError"), (["--solutions"], "def c_strides")):
        proc = subprocess.run([sys.executable, "-m", "grader.cli", "notebooks", "--out",
                               tmp_path / "nb", "--exercises", "strides_broadcasting", *extra],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        nb = json.loads((tmp_path / "nb" / "strides_broadcasting.ipynb").read_text())
        stubs = "".join("".join(c["source"]) for c in nb["cells"]
                        if c["metadata"]["torchgrade"]["role"] == "stub")
        assert needle in stubs
    assert "raise NotImplementedError" not in stubs


def test_a_notebook_without_cell_ids_is_read_without_a_warning():
    """Notebooks saved before nbformat 4.5 have no cell ids; nbformat warns of it on stderr,
    which broke `grade`'s progress lines. Its cells are read, silently."""
    import warnings

    nb = {"cells": [{"cell_type": "code", "source": "def f():\n    return 1\n", "metadata": {},
                     "outputs": [], "execution_count": None}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chunks, notes = notebook_chunks(json.dumps(nb), "s.ipynb")
    assert [c.code for c in chunks] == ["def f():\n    return 1\n"] and not notes
    assert not caught, [str(w.message) for w in caught]
