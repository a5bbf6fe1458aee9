"""The generated notebooks in a real Jupyter kernel (nbclient + ipykernel), as a student runs
them: the notebooks of the student release, with the release installed, top to bottom.

With the reference solutions filled in, every "check your work" cell must report its visible
checks passed; the untouched notebooks must run to the end too (no cell may raise) and report
what is not implemented yet. The checks run in the grader's own process (`grader.check_server`),
never in the kernel.
"""

from __future__ import annotations

import re
import subprocess
import sys

import nbformat
import pytest

from conftest import SOLUTIONS
from grader.notebooks import fill_solutions
from grader.registry import known_exercises

nbclient = pytest.importorskip("nbclient")
ALL = known_exercises()
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def run_notebook(nb, folder, env) -> list[tuple[str, str]]:
    """Execute `nb` in a fresh python3 kernel whose working folder is `folder`; returns
    (check cell id, its printed output) for every check cell. Raises if any cell raises."""
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(folder)}})
    client.execute(env=env)
    outputs = []
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.metadata["torchgrade"]["role"] == "check":
            text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
            outputs.append((cell.id, ANSI.sub("", text)))
    return outputs


def kernel_grader(folder, env) -> str:
    """Which grader the kernel imports (the release's, not the development package)."""
    code = "import grader; print(grader.__file__)"
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=folder,
                          capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("exercise", ALL)
def test_release_notebooks_with_solutions_pass_their_checks_in_a_kernel(
        exercise, student_release, installed_release, tmp_path):
    assert "student-site" in kernel_grader(tmp_path, installed_release)
    nb = nbformat.read(student_release / "notebooks" / f"{exercise}.ipynb", as_version=4)
    nb = fill_solutions(nb, (SOLUTIONS / f"{exercise}.py").read_text())
    outputs = run_notebook(nb, tmp_path, installed_release)
    assert len(outputs) >= 2
    for cell_id, text in outputs:
        assert "Every check passed." in text, (cell_id, text[-3000:])
        assert "[ PASSED  ]" in text and "[ FAILED  ]" not in text and "[  ERROR  ]" not in text
    whole = outputs[-1][1]
    assert "Hidden checks:" in whole and "[ HIDDEN  ]" in whole  # titles of the hidden ones
    assert (tmp_path / "torchgrade-check" / f"{exercise}-notebook" / "report.html").is_file()


@pytest.mark.parametrize("exercise", ALL)
def test_untouched_release_notebooks_run_and_report_failures(
        exercise, student_release, installed_release, tmp_path):
    nb = nbformat.read(student_release / "notebooks" / f"{exercise}.ipynb", as_version=4)
    outputs = run_notebook(nb, tmp_path, installed_release)  # raises if a cell raised
    for cell_id, text in outputs:
        assert "not implemented yet" in text and "Every check passed." not in text, \
            (cell_id, text[-2000:])
        assert re.search(r"Score: 0 / \d+", text), text[-2000:]
