"""Finding and reading submissions: every problem becomes a message, nothing raises."""

import json
from pathlib import Path
import zipfile

import nbformat
import pytest

from grader.intake.notebook import strip_ipython
from grader.intake.submission import load_submission

pytestmark = pytest.mark.fast

EX = ["strides_broadcasting", "other"]


def write(root, files):
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return root


def notebook(*cells, valid=True) -> str:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    return nbformat.writes(nb)


def test_finds_files_at_the_top_and_one_folder_deeper(tmp_path):
    root = write(tmp_path / "alice", {"hw1/strides_broadcasting.py": "x = 1\n",
                                      "other.py": "y = 2\n", "unrelated.py": "z = 3\n"})
    sub = load_submission(root, exercises=EX)
    assert sub.student == "alice"
    assert sub.modules["strides_broadcasting"].path == "hw1/strides_broadcasting.py"
    assert sub.modules["other"].chunks[0].code == "y = 2\n"


def test_prefers_the_shallowest_file_and_says_so(tmp_path):
    root = write(tmp_path / "s", {"strides_broadcasting.py": "a = 1\n",
                                  "old/strides_broadcasting.py": "a = 2\n",
                                  "strides_broadcasting.ipynb": notebook("a = 3")})
    module = load_submission(root, exercises=EX).modules["strides_broadcasting"]
    assert module.path == "strides_broadcasting.py"
    assert any("also found" in n and "old/strides_broadcasting.py" in n for n in module.notes)


STUB = '''def f(x):
    """Twice x."""
    raise NotImplementedError


def g(x):
    raise NotImplementedError("fill me in")
'''


@pytest.mark.parametrize("files, graded", [
    # a release folder handed in whole: its untouched stub beside the notebook filled in
    ({"exercises/strides_broadcasting.py": STUB,
      "notebooks/strides_broadcasting.ipynb": notebook("def f(x):\n    return 2 * x",
                                                       "def g(x):\n    return x")},
     "notebooks/strides_broadcasting.ipynb"),
    # a first draft beside the finished file, as deep
    ({"v1/strides_broadcasting.py": STUB.replace("raise NotImplementedError\n", "return 2 * x\n",
                                                 1),
      "v2/strides_broadcasting.py": STUB.replace("raise NotImplementedError", "return x")},
     "v2/strides_broadcasting.py"),
    # but the shallower before the more finished (a release folder holds its grader, whose
    # probes/strides_broadcasting.py is a finished file)
    ({"exercises/strides_broadcasting.py": STUB,
      "grader/probes/strides_broadcasting.py": "def probe():\n    return 1\n"},
     "exercises/strides_broadcasting.py"),
    # but an exactly named file before a decorated one, however finished (a release folder
    # holds its checks, test_strides_broadcasting.py)
    ({"exercises/strides_broadcasting.py": STUB,
      "grader/checks/test_strides_broadcasting.py": "def test_f():\n    pass\n"},
     "exercises/strides_broadcasting.py"),
    # a file that cannot run at all loses to any other
    ({"strides_broadcasting.py": b"\xff\xfe" + "x = 1".encode("utf-16-le"),
      "deeper/strides_broadcasting.py": STUB}, "deeper/strides_broadcasting.py"),
])
def test_of_several_files_the_most_finished_is_graded(tmp_path, files, graded):
    module = load_submission(write(tmp_path / "s", files), exercises=EX).modules[
        "strides_broadcasting"]
    assert module.path == graded
    assert any(n.startswith(f"graded {graded}; also found") for n in module.notes), module.notes


def test_a_thousand_copies_are_not_all_read(tmp_path, monkeypatch):
    """Each candidate compared is read and parsed in the grading process: only the first few."""
    from grader.intake import submission

    files = {f"c{i:03d}/strides_broadcasting.py": STUB for i in range(40)}
    read = []
    real = submission.read_module
    monkeypatch.setattr(submission, "read_module",
                        lambda e, f, b: read.append(f) or real(e, f, b))
    module = load_submission(write(tmp_path / "s", files), exercises=EX).modules[
        "strides_broadcasting"]
    assert module.path == "c000/strides_broadcasting.py"
    assert len(read) == submission.MAX_COMPARED < 40
    assert "c039/strides_broadcasting.py" in module.notes[-1]  # still named as ignored


def test_a_file_saved_as_utf16_is_said_to_be_so(tmp_path):
    root = write(tmp_path / "s", {"strides_broadcasting.py": "x = 1\n".encode("utf-16")})
    module = load_submission(root, exercises=EX).modules["strides_broadcasting"]
    assert module.fatal is not None and "UTF-16" in module.fatal and "UTF-8" in module.fatal


def test_ignores_checkpoints_caches_and_hidden_folders(tmp_path):
    root = write(tmp_path / "s", {".ipynb_checkpoints/strides_broadcasting.py": "bad = 1\n",
                                  "__pycache__/strides_broadcasting.py": "bad = 1\n",
                                  ".hidden/strides_broadcasting.py": "bad = 1\n"})
    assert load_submission(root, exercises=EX).modules == {}


def test_a_zip_inside_the_student_folder(tmp_path):
    root = tmp_path / "bob"
    root.mkdir()
    with zipfile.ZipFile(root / "upload.zip", "w") as z:
        z.writestr("bob/hw1/strides_broadcasting.py", "v = 1\n")
        z.writestr("__MACOSX/bob/hw1/._strides_broadcasting.py", "junk")
        z.writestr("../evil/other.py", "w = 1\n")
    sub = load_submission(root, exercises=EX)
    assert sub.modules["strides_broadcasting"].chunks[0].code == "v = 1\n"
    assert "other" not in sub.modules


def test_a_bare_zip_and_a_broken_zip(tmp_path):
    good = tmp_path / "carol.zip"
    with zipfile.ZipFile(good, "w") as z:
        z.writestr("strides_broadcasting.py", "v = 1\n")
    assert load_submission(good, exercises=EX).student == "carol"
    bad = tmp_path / "dave"
    write(bad, {"sub.zip": b"PK\x03\x04 not really a zip"})
    sub = load_submission(bad, exercises=EX)
    assert sub.modules == {} and "not a readable zip file" in sub.notes[0]


def test_syntax_error_names_file_and_line(tmp_path):
    root = write(tmp_path / "s", {"strides_broadcasting.py": "x = 1\ndef f(:\n    pass\n"})
    module = load_submission(root, exercises=EX).modules["strides_broadcasting"]
    assert module.fatal.startswith("SyntaxError in strides_broadcasting.py, line 2")


@pytest.mark.parametrize("content, words", [
    (b"\x00\x01\x02binary", "binary"),
    (b"x = '\xff\xfe'\ndef f():\n    return 1\n", "not valid UTF-8 (byte 0xff on line 1)"),
])
def test_binary_and_non_utf8_files(tmp_path, content, words):
    root = write(tmp_path / "s", {"strides_broadcasting.py": content})
    module = load_submission(root, exercises=EX).modules["strides_broadcasting"]
    assert words in (module.fatal or "") + " ".join(module.notes)


def test_latin1_with_a_coding_cookie_is_read_as_declared(tmp_path):
    root = write(tmp_path / "s", {"strides_broadcasting.py":
                                  "# -*- coding: latin-1 -*-\nname = 'Jos\xe9'\n"
                                  .encode("latin-1")})
    module = load_submission(root, exercises=EX).modules["strides_broadcasting"]
    assert "José" in module.chunks[0].code and not module.notes and module.fatal is None


def test_empty_file_is_noted(tmp_path):
    root = write(tmp_path / "s", {"strides_broadcasting.py": ""})
    module = load_submission(root, exercises=EX).modules["strides_broadcasting"]
    assert module.fatal is None and "empty" in module.notes[0]


@pytest.mark.parametrize("text, words", [
    ("{not json", "not valid JSON"),
    ("[1, 2, 3]", "could not be read"),
])
def test_unreadable_notebooks(tmp_path, text, words):
    root = write(tmp_path / "s", {"strides_broadcasting.ipynb": text})
    module = load_submission(root, exercises=EX).modules["strides_broadcasting"]
    assert words in module.fatal


def test_invalid_nbformat_is_read_leniently(tmp_path):
    nb = json.loads(notebook("def f():\n    return 1"))
    del nb["metadata"]
    nb["cells"][0]["bogus"] = True
    root = write(tmp_path / "s", {"strides_broadcasting.ipynb": json.dumps(nb)})
    module = load_submission(root, exercises=EX).modules["strides_broadcasting"]
    assert module.fatal is None and "def f" in module.chunks[0].code
    assert any("not valid nbformat" in n for n in module.notes)


def test_notebook_cells_magics_and_syntax_errors(tmp_path):
    text = notebook("%matplotlib inline\nimport numpy as np", "def f():\n    !ls\n    return 1",
                    "%%bash\necho hi", "%%time\nx = f()", "def broken(:\n  pass", "")
    root = write(tmp_path / "s", {"strides_broadcasting.ipynb": text})
    module = load_submission(root, exercises=EX).modules["strides_broadcasting"]
    codes = [c.code for c in module.chunks]
    assert codes[0].startswith("pass\nimport numpy") and "    pass\n    return 1" in codes[1]
    assert len(codes) == 3 and codes[2] == "\nx = f()\n"
    assert all(c.keep_going for c in module.chunks)
    notes = " | ".join(module.notes)
    assert "%%bash" in notes and "SyntaxError" in notes and "cell 5" in notes


def test_strip_ipython_keeps_line_numbers():
    code, note = strip_ipython("a = 1\n%timeit b = 2\n  !echo\nc = 3")
    assert code.splitlines() == ["a = 1", "pass", "  pass", "c = 3"] and "2" in note


def test_a_timed_statement_is_kept_without_its_magic():
    """`%time y = f(x)` runs and assigns in Jupyter: removing the line lost y (a NameError in
    code that works in the notebook)."""
    code, note = strip_ipython("def f(x):\n    %time y = x - 1\n    return y\n%time\n")
    assert code.splitlines() == ["def f(x):", "    y = x - 1", "    return y", "pass"]
    assert "2 IPython magic" in note


def test_a_single_file_with_the_wrong_name(tmp_path):
    path = write(tmp_path / "s", {"homework.py": "x = 1\n"}) / "homework.py"
    sub = load_submission(path, exercises=EX)
    assert sub.modules == {} and "name it after the exercise" in sub.notes[0]


def test_symlinks_are_not_followed(tmp_path):
    secret = write(tmp_path / "other_student", {"strides_broadcasting.py": "secret = 1\n"})
    root = tmp_path / "mallory"
    root.mkdir()
    (root / "strides_broadcasting.py").symlink_to(secret / "strides_broadcasting.py")
    (root / "link").symlink_to(secret)
    sub = load_submission(root, exercises=EX)
    assert sub.modules == {} and "symbolic link" in sub.notes[0]


@pytest.mark.parametrize("name", ["Strides_Broadcasting.PY", "strides_broadcasting (2).PY",
                                  "STRIDES_BROADCASTING.IPYNB"])
def test_an_upper_case_suffix_is_the_suffix(tmp_path, name):
    """Windows and some LMSs upper-case names: `X.PY` is a Python file (it was listed among the
    files found, and the exercise scored as not handed in)."""
    text = "x = 1\n" if name.endswith(".PY") else notebook("x = 1")
    root = write(tmp_path / "s", {name: text})
    sub = load_submission(root, exercises=EX)
    assert list(sub.modules) == ["strides_broadcasting"]
    assert sub.modules["strides_broadcasting"].kind == ("py" if name.endswith(".PY") else "ipynb")
    zipped = tmp_path / "z" / "ALICE.ZIP"
    zipped.parent.mkdir()
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr(name, text)
    assert list(load_submission(zipped, exercises=EX).modules) == ["strides_broadcasting"]


def test_a_misnamed_file_is_said_in_the_gradebook_remarks(tmp_path):
    from grader.intake.submission import misfiled
    from grader.models import SubmissionResult
    from grader.outputs.exports import remarks

    sub = load_submission(write(tmp_path / "s", {"stridesbroadcasting.py": "x = 1\n"}),
                          exercises=["strides_broadcasting"])
    assert sub.modules == {}
    said = [m for n in sub.notes if (m := misfiled(n))]
    assert said == ["not graded: stridesbroadcasting.py (no exercise has its name)"]
    result = SubmissionResult(student="s", grader_version="0", notes=sub.notes)
    assert remarks(result) == said[0]
    # An empty folder is "nothing handed in", not a misnamed file; nor is a missing exercise
    # beside files that are other exercises' (or not Python at all).
    (tmp_path / "e").mkdir()
    empty = load_submission(tmp_path / "e", exercises=["strides_broadcasting"])
    other = load_submission(write(tmp_path / "o", {"other.py": "x = 1\n", "notes.txt": "hi"}),
                            exercises=EX)
    assert not any(misfiled(n) for n in empty.notes + other.notes)
    assert any(n.startswith("no file for strides_broadcasting") for n in other.notes)


def test_a_cell_is_named_by_its_place_and_the_run_count_jupyter_shows():
    """The check cell named a cell by its run count, `torchgrade check` of the saved file by its
    place among all cells: the same cell read "cell 4" and "cell 6"."""
    from grader.intake.notebook import FROM_HISTORY, notebook_chunks

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# intro"),
        nbformat.v4.new_code_cell("x = 1", execution_count=4),
        nbformat.v4.new_code_cell("y = 2")])
    chunks, _ = notebook_chunks(nbformat.writes(nb), "e.ipynb")
    assert [c.label for c in chunks] == ["cell 2, In [4]", "cell 3"]
    assert chunks[0].filename == "e.ipynb [cell 2, In [4]]"
    nb.metadata["torchgrade"] = {FROM_HISTORY: True}  # the kernel's history (grader.jupyter)
    chunks, _ = notebook_chunks(nbformat.writes(nb), "e.ipynb")
    assert [c.label for c in chunks] == ["In [4]", "cell 3"]


def test_a_cell_that_only_calls_check_is_a_check_cell_too(tmp_path):
    """`check(...)` in a cell of its own after `from grader.jupyter import check`: it was
    graded as the student's code (and raised NameError, a note at every check)."""
    root = write(tmp_path / "s", {"strides_broadcasting.ipynb": notebook(
        "import numpy as np", "from grader.jupyter import check as run_check",
        "def c_strides(shape, itemsize):\n    return ()",
        "run_check('strides_broadcasting', 'c_strides')",
        "r = run_check('strides_broadcasting')", "print(run_check)")})
    module = load_submission(root, exercises=EX).modules["strides_broadcasting"]
    codes = [c.code for c in module.chunks]
    assert not any("run_check(" in c for c in codes), codes
    assert "print(run_check)\n" in codes  # more than a call: the student's code, kept
    assert "def c_strides" in "".join(codes)


def test_a_notebook_too_large_says_its_outputs_count(tmp_path):
    from grader.intake.submission import Found, read_module

    big = Found("hw/strides_broadcasting.ipynb", 1, 60 << 20, lambda limit: b"")
    module = read_module("strides_broadcasting", big)
    assert module.fatal is not None and "Clear" in module.fatal and "outputs" in module.fatal
    small_py = Found("strides_broadcasting.py", 0, 60 << 20, lambda limit: b"")
    assert "outputs" not in (read_module("strides_broadcasting", small_py).fatal or "")


def test_a_name_missing_beside_a_skipped_cell_points_at_that_cell(tmp_path):
    from grader.checking.student import StudentModule
    from grader.worker.limits import WorkerLimits

    root = write(tmp_path / "s", {"strides_broadcasting.ipynb": notebook(
        "def c_strides(shape, itemsize):\n    return ()",
        "def is_c_contiguous(shape, strides, itemsize):\n    return True)")})
    source = load_submission(root, exercises=EX).modules["strides_broadcasting"]
    module = StudentModule("strides_broadcasting", source, spawn=None, limits=WorkerLimits())
    said = str(module._not_defined("is_c_contiguous", "is_c_contiguous(...)"))
    assert "does not compile was skipped" in said and "SyntaxError" in said, said
    assert "check its spelling" not in said


def test_a_live_kernels_check_leaves_out_the_cells_that_call_check(tmp_path, monkeypatch):
    """`check()` in a kernel sends the cells run so far; a cell that only calls check (after
    the cell that imported it) was sent as the student's code and raised NameError at every
    later check. The kernel now leaves the choice to `notebook_chunks`, as for a handed-in
    notebook."""
    import grader.jupyter as jupyter
    from grader.intake.notebook import notebook_chunks

    history = ["", "import numpy as np", "from grader.jupyter import check",
               "def c_strides(shape, itemsize):\n    return ()",
               "check('strides_broadcasting', 'c_strides')"]
    shell = type("Shell", (), {"history_manager": type("H", (), {"input_hist_raw": history})})
    sent = []
    monkeypatch.setattr(jupyter, "_shell", lambda: shell)
    monkeypatch.setattr(jupyter, "_ask_server",
                        lambda request: sent.append(Path(request["path"]).read_text()) or 0)
    jupyter.check("strides_broadcasting", out=str(tmp_path))
    chunks, notes = notebook_chunks(sent[0], "strides_broadcasting.ipynb")
    assert [c.code.strip() for c in chunks] == [
        "import numpy as np", "def c_strides(shape, itemsize):\n    return ()"], chunks


def test_a_release_folders_own_grader_is_no_candidate(tmp_path):
    """Issue 41: `torchgrade check .` in a release listed the grader's probes, checks and
    stubs as files not graded in every exercise's note. A folder holding the release's marker
    is the grader, never the student's work; a folder of that name without it is searched."""
    from grader.intake.submission import RELEASE_MARKER

    root = write(tmp_path / "release", {
        "exercises/strides_broadcasting.py": STUB,
        "grader/" + RELEASE_MARKER: "{}",
        "grader/probes/strides_broadcasting.py": "def probe():\n    return 1\n",
        "grader/curriculum/exercises/strides_broadcasting.py": STUB,
        "grader/curriculum/checks/test_strides_broadcasting.py": "def test_f():\n    pass\n",
        "grader/curriculum/exercises/other.py": "y = 2\n"})
    sub = load_submission(root, exercises=EX)
    module = sub.modules["strides_broadcasting"]
    assert module.path == "exercises/strides_broadcasting.py"
    assert "other" not in sub.modules
    notes = sub.notes + module.notes
    assert not [n for n in notes if "grader/" in n], notes
    (root / "grader" / RELEASE_MARKER).unlink()  # a student's own folder named grader
    sub = load_submission(root, exercises=EX)
    assert sub.modules["other"].path == "grader/curriculum/exercises/other.py"
