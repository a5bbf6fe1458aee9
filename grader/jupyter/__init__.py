"""`check()` for the "check your work" cells of generated notebooks.

The kernel only gathers the code: the source of every cell run in this kernel session, in the
order it ran (IPython's input history), without the check cells. It writes those cells as a
notebook into a temporary folder and has a grader in a separate Python process check it, exactly
like a handed-in notebook: the cells run in the grader's sandboxed worker, and every verdict is
computed in that grader process. No check runs in the kernel, so nothing the notebook's code did
there (to numpy, to torch, to builtins) can touch a verdict.

The grader process (`grader.jupyter.server`) is started by the first check of a kernel and kept
warm for the next ones (a check then takes about a second instead of several); it ends with the
kernel. Should it fail, the check falls back to a one-off `torchgrade check` process.

Why the history and not the notebook file: the file on disk holds what was last *saved*, the
kernel holds what was *run*; the history is what the kernel's definitions were built from. A
kernel restart starts a clean history, like "Restart and run all" starts a clean namespace.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

from grader.course.folder import ENV as COURSE_ENV
from grader.intake.notebook import FROM_HISTORY

REPORTS = "torchgrade-check"
DONE = "\x1etorchgrade-check-done"  # grader.jupyter.server.DONE (not imported: it is heavier)
_server: subprocess.Popen | None = None


def check(exercise: str, *names: str, out: str = REPORTS, color: bool = True,
          course: str | None = None) -> None:
    """Check the cells run so far: the visible checks of `exercise` (only those about `names`,
    when given), printed with the hidden checks' titles; the report goes to
    `out/<exercise>/report.html` (where `torchgrade check` writes that exercise's report), or,
    of the checks about `names`, to `out/<exercise>/only/report.html` (as `check --only`).
    `course`: the course folder whose checks to use (default: TORCHGRADE_COURSE, else the
    installed default course)."""
    if course is not None and os.environ.get(COURSE_ENV) != course:
        os.environ[COURSE_ENV] = course  # the grader processes started below inherit it
        _restart_server()
    shell = _shell()
    if shell is None:
        print(f"check() works inside a Jupyter notebook. Elsewhere, run:\n"
              f"    torchgrade check {exercise}.py")
        return
    # (each with its run count: messages then name it "In [4]", as Jupyter shows it; the check
    # cells go too: which cells are graded is decided where a handed-in notebook's are,
    # `grader.intake.notebook.notebook_chunks`, which needs them to know what calls check)
    cells = [nbformat.v4.new_code_cell(c, execution_count=count)
             for count, c in enumerate(shell.history_manager.input_hist_raw[1:], start=1)
             if c.strip()]
    if not cells:
        print("No cell of this notebook has run yet: run the cells above this one first.")
        return
    notebook = nbformat.v4.new_notebook(cells=cells,
                                        metadata={"torchgrade": {FROM_HISTORY: True}})
    with tempfile.TemporaryDirectory(prefix="torchgrade-") as tmp:
        path = Path(tmp) / f"{exercise}-notebook" / f"{exercise}.ipynb"
        path.parent.mkdir()
        path.write_text(nbformat.writes(notebook), encoding="utf-8")
        request = {"path": str(path), "out": str(Path(out).resolve()), "exercise": exercise,
                   "only": list(names), "color": color}
        if _ask_server(request) is None:
            command = [sys.executable, "-m", "grader.cli", "check", str(path), "--out", out,
                       "--exercises", exercise, "--color", "always" if color else "never"]
            if names:
                command += ["--only", ",".join(names)]
            _stream(command)


def _restart_server() -> None:
    global _server
    if _server is not None:
        _stop_server(_server)
        _server = None


def _shell():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return shell if shell is not None and hasattr(shell, "history_manager") else None


def _ask_server(request: dict) -> int | None:
    """Have the warm grader check; its exit code, or None if it could not answer."""
    global _server
    if _server is None or _server.poll() is not None:
        _server = subprocess.Popen([sys.executable, "-m", "grader.jupyter.server"],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, bufsize=1)
        atexit.register(_stop_server, _server)
    try:
        assert _server.stdin is not None and _server.stdout is not None
        _server.stdin.write(json.dumps(request) + "\n")
        _server.stdin.flush()
        for line in _server.stdout:
            if line.startswith(DONE):
                return int(line.split()[-1])
            print(line, end="", flush=True)
    except KeyboardInterrupt:
        _stop_server(_server)
        _server = None
        raise
    except (OSError, ValueError):
        pass
    _stop_server(_server)  # it died without finishing: the next check starts a new one
    _server = None
    return None


def _stop_server(process: subprocess.Popen) -> None:
    if process.poll() is None:
        try:
            if process.stdin is not None:  # started with stdin=PIPE: closing it says stop
                process.stdin.close()
            process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()


def _stream(command: list[str]) -> int:
    """Run a one-off grader, printing its lines as they come; Ctrl-C stops it."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, text=True, bufsize=1)
    try:
        assert process.stdout is not None
        for line in process.stdout:
            print(line, end="", flush=True)
        return process.wait()
    except KeyboardInterrupt:
        process.terminate()
        process.wait()
        raise
