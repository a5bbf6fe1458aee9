"""`torchgrade similarity`: disguised copies flagged with their source, independent solutions
in different styles and untouched stubs never, the CSV and the page, the link from index.html,
hostile files as notes. Fast: no student code runs (the command only reads and parses)."""

from __future__ import annotations

import csv
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from grader import cli
from grader.commands.similarity import similarity
from grader.similarity import compare
from grader.similarity.compare import Starter, compare_class, own_work
from grader.similarity.normalise import normalised
from similarity_class import (COPIED_BY_HAND, EXERCISES, contract, independent_solutions,
                              make_class, partly_copied, recommented, reformatted, renamed,
                              reordered, stub, write_class)

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """A class of independent solutions, disguised copies and stubs, compared once."""
    root = tmp_path_factory.mktemp("similarity")
    students = make_class(copies=2)
    write_class(students, root / "class")
    summary = similarity(root / "class", out=root / "out")
    rows = list(csv.DictReader(io.StringIO((root / "out" / "similarity.csv").read_text())))
    return students, summary, rows, root


def _flagged(rows) -> set[tuple[str, str, str]]:
    return {(r["exercise"], r["student_a"], r["student_b"]) for r in rows
            if r["flagged"] == "true"}


def test_every_disguised_copy_is_flagged_with_its_source(generated):
    students, _, rows, _ = generated
    flagged = _flagged(rows)
    expected = {(e, *sorted((s.sid, source))) for s in students
                for e, sources in s.copied_from.items() for source in sources}
    assert len(expected) == 16 * len(EXERCISES)  # 7 kinds of disguise (one of two sources)
    # A patchwork of two classmates' halves is flagged with one of them at least (the one it
    # took most from; docs/similarity.md: a copy of under 40% of the work is given up).
    patchwork = {s.sid for s in students if any(len(v) > 1 for v in s.copied_from.values())}
    missed = expected - flagged
    assert sorted(m for m in missed if not {m[1], m[2]} & patchwork) == []
    for s in students:
        for e, sources in s.copied_from.items():
            assert any((e, *sorted((s.sid, src))) in flagged for src in sources), (s.sid, e)


def test_no_independent_pair_and_no_stub_pair_is_flagged(generated):
    students, _, rows, _ = generated
    work = {s.sid: {e: set(s.copied_from.get(e, (s.sid,))) for e in s.files}
            for s in students}
    # a copy may be flagged with another copy of its source: that is the same work
    wrong = [(e, a, b) for e, a, b in _flagged(rows) if not work[a][e] & work[b][e]]
    assert wrong == []


def test_independent_solutions_are_each_others_closest_below_the_threshold():
    for e in EXERCISES:
        starter = Starter.of(e, stub(e))
        prints = {style: own_work(source, starter).fingerprints()
                  for style, source in independent_solutions(e).items()}
        pairs = compare_class(e, prints)
        assert len(pairs) >= len(prints) // 2, e
        assert all(p.similarity < compare.THRESHOLD and not p.flagged for p in pairs), e


def test_the_untouched_stub_shares_nothing(generated):
    _, _, rows, _ = generated
    stub_rows = [r for r in rows if "stub_" in r["student_a"] + r["student_b"]]
    assert stub_rows, "a stub student has a closest classmate too"
    assert all(r["flagged"] == "false" for r in stub_rows)
    assert all(float(r["similarity"]) == 0 for r in stub_rows
               if r["student_a"].startswith("stub_") or r["student_b"].startswith("stub_"))


def test_the_csv_lists_every_students_closest_classmate_most_similar_first(generated):
    students, summary, rows, root = generated
    text = (root / "out" / "similarity.csv").read_text()
    assert text.splitlines()[0] == "exercise,student_a,student_b,similarity,flagged"
    values = [float(r["similarity"]) for r in rows]
    assert values == sorted(values, reverse=True)
    assert all(0 <= v <= 1 for v in values) and {r["flagged"] for r in rows} <= {"true", "false"}
    for e in EXERCISES:
        handed_in = {s.sid for s in students if e in s.files}
        listed = {x for r in rows if r["exercise"] == e for x in (r["student_a"], r["student_b"])}
        assert handed_in <= listed, e
    assert summary.exercises == list(dict.fromkeys(
        e for e in summary.exercises))  # each once
    assert set(summary.exercises) == set(EXERCISES)


def test_the_page_shows_flagged_pairs_side_by_side(generated):
    _, summary, rows, root = generated
    page = (root / "out" / "similarity.html").read_text()
    assert page.count('class="sim-pair"') == min(len(_flagged(rows)), 100)
    for kind in ("match", "starter", "ignored"):
        assert f'sim-line sim-{kind}"' in page, kind
    top = summary.flagged[0]
    assert f"{top.exercise}: {top.a} and {top.b}" in page


def test_renaming_reordering_formatting_and_comments_change_no_token():
    e = "strides_broadcasting"
    source, keep = independent_solutions(e)["by_hand"], contract(e)
    tokens = normalised(source, contract=keep).text
    for disguise in (renamed(source, keep, seed=3), reordered(source), reformatted(source),
                     recommented(source)):
        assert normalised(disguise, contract=keep).text == tokens
    twice = renamed(renamed(source, keep, seed=1), keep, seed=2)
    assert normalised(twice, contract=keep).text == tokens
    assert normalised(source.replace("+ 1", "+ 2"), contract=keep).text != tokens


def test_a_class_with_its_methods_reordered_and_renamed_is_the_same_tokens():
    for e in ("parameters", "data_pipeline"):
        keep = contract(e)
        for source in independent_solutions(e).values():
            assert "class " in source
            tokens = normalised(source, contract=keep).text
            assert normalised(reordered(renamed(source, keep)), contract=keep).text == tokens


def test_prints_and_the_way_a_name_is_imported_change_no_token():
    plain = "import numpy as np\n\ndef f(x):\n    y = np.mean(x, axis=0)\n    return x - y\n"
    padded = ("from numpy import mean\n\ndef f(data):\n    print('debug', data)\n"
              "    avg = mean(data, axis=0)\n    print(avg)\n    return data - avg\n")
    a, b = normalised(plain).text, normalised(padded).text
    assert a[:a.index("⇤")] == b[:b.index("⇤")]  # the function; the imports differ
    assert "print" not in normalised(padded).text


def test_starter_code_is_never_own_work():
    for e in EXERCISES:
        starter = Starter.of(e, stub(e))
        assert len(own_work(stub(e), starter).fingerprints()) == 0, e
        assert len(own_work(independent_solutions(e)["reference"], starter).fingerprints()) > 50


def test_a_partial_copy_scores_the_share_copied():
    e = "parameters"
    styles = list(independent_solutions(e).values())
    starter = Starter.of(e, stub(e))
    prints = {"source": own_work(styles[0], starter).fingerprints(),
              "half": own_work(partly_copied(styles[0], styles[1]), starter).fingerprints(),
              "other": own_work(styles[1], starter).fingerprints()}
    scores = {(p.a, p.b): p.similarity for p in compare_class(e, prints)}
    assert 0.2 <= min(scores["half", "source"], scores["half", "other"])
    assert compare.THRESHOLD <= max(scores["half", "source"], scores["half", "other"]) < 0.9
    apart = compare_class(e, {k: prints[k] for k in ("source", "other")})
    assert [(p.a, p.b, p.flagged) for p in apart] == [("other", "source", False)]
    assert apart[0].similarity < compare.THRESHOLD


def test_a_fingerprint_most_of_a_large_class_shares_is_common(monkeypatch):
    """The bound on memory: a fingerprint more than the cutoff hold counts for no pair."""
    monkeypatch.setattr(compare, "COMMON_MIN", 3)
    size = 2 * compare.MIN_SHARED  # (enough to be flagged, were they not common)
    common = np.arange(1000, 1000 + size, dtype=np.int64)
    prints = {f"s{i}": common for i in range(6)}
    prints["s0"] = prints["s1"] = np.arange(0, size, dtype=np.int64)  # a pair of their own
    pairs = compare_class("x", prints)
    assert [(p.a, p.b) for p in pairs if p.flagged] == [("s0", "s1")]
    assert all(p.similarity == 0 for p in pairs if p.a != "s0")


def test_hostile_files_are_notes_not_failures(tmp_path, capsys):
    keep = contract("strides_broadcasting")
    good = renamed(independent_solutions("strides_broadcasting")["by_hand"], keep)
    files = {
        "huge": "x = 1\n" * 60_000,                      # over the parsing bound, not intake's
        "latin1": "# caf\xe9\n".encode("latin-1") + good.encode(),
        "broken": "def c_strides(shape, itemsize):\n    return (\n",
        "nested": "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n",
        "binary": b"\x00\x01\x02",
        "copier": good,
        "source": independent_solutions("strides_broadcasting")["by_hand"],
    }
    for sid, content in files.items():
        (tmp_path / "class" / sid).mkdir(parents=True)
        path = tmp_path / "class" / sid / "strides_broadcasting.py"
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with zipfile.ZipFile(tmp_path / "class" / "zipped.zip", "w") as z:  # a zip, as `grade`
        z.writestr("hw/strides_broadcasting.py", good)
    code = cli.main(["similarity", str(tmp_path / "class"), "--out", str(tmp_path / "out")])
    printed = capsys.readouterr().out
    assert code == 0, printed
    rows = list(csv.DictReader(io.StringIO((tmp_path / "out" / "similarity.csv").read_text())))
    flagged = _flagged(rows)
    assert ("strides_broadcasting", "copier", "source") in flagged
    assert ("strides_broadcasting", "copier", "zipped") in flagged
    assert ("strides_broadcasting", "latin1", "source") in flagged  # decoded as `grade` does
    page = (tmp_path / "out" / "similarity.html").read_text()
    for sid in ("huge", "broken", "nested", "binary"):
        assert f"{sid}, strides_broadcasting:" in page, sid
    assert "not compared" in printed


def test_student_text_is_escaped_on_the_page(tmp_path):
    e = "strides_broadcasting"
    source = independent_solutions(e)["by_hand"].replace(
        "import math", "import math\nTAG = '<script>alert(1)</script>'")
    for sid in ("a", "b"):
        (tmp_path / "class" / sid).mkdir(parents=True)
        (tmp_path / "class" / sid / f"{e}.py").write_text(source)
    similarity(tmp_path / "class", out=tmp_path / "out")
    page = (tmp_path / "out" / "similarity.html").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert" not in page


def test_bug_hunts_are_said_out_of_scope(tmp_path, capsys):
    (tmp_path / "class" / "a" / "bughunt").mkdir(parents=True)
    (tmp_path / "class" / "a" / "bughunt" / "regression.py").write_text("x = 1\n")
    (tmp_path / "class" / "a" / "strides_broadcasting.py").write_text(stub("strides_broadcasting"))
    code = cli.main(["similarity", str(tmp_path / "class"), "--out", str(tmp_path / "out")])
    assert code == 0
    assert "bughunt_regression" in capsys.readouterr().out
    assert "Not compared: bughunt_regression" in (tmp_path / "out" / "similarity.html").read_text()


def test_unknown_exercise_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "class" / "a").mkdir(parents=True)
    code = cli.main(["similarity", str(tmp_path / "class"), "--out", str(tmp_path / "out"),
                     "--exercises", "no_such_exercise"])
    assert code == 2
    assert not (tmp_path / "out" / "similarity.csv").exists()


def _graded_out(out: Path, students: list[str]) -> None:
    """OUT as `grade` leaves it (results.json per student, the marker), without grading."""
    from grader.intake.submission import OUT_MARKER
    from grader.models import SubmissionResult
    from grader.outputs.folder import write_submission_outputs

    out.mkdir(parents=True, exist_ok=True)
    (out / OUT_MARKER).write_text("")
    for sid in students:
        write_submission_outputs(SubmissionResult(student=sid, grader_version="test"), out)


def test_index_links_the_page_whichever_runs_first(tmp_path):
    from grader.commands.index import index
    from grader.intake.students import check_folders

    e = "strides_broadcasting"
    for sid in ("a", "b"):
        (tmp_path / "class" / sid).mkdir(parents=True)
        (tmp_path / "class" / sid / f"{e}.py").write_text(stub(e))
    # grade first, then similarity: the index is rebuilt to link the page
    _graded_out(tmp_path / "graded", ["a", "b"])
    index(tmp_path / "graded", exercises=[e])
    assert 'href="similarity.html"' not in (tmp_path / "graded" / "index.html").read_text()
    summary = similarity(tmp_path / "class", out=tmp_path / "graded")
    assert summary.indexed
    assert 'href="similarity.html"' in (tmp_path / "graded" / "index.html").read_text()
    # similarity first, then grade (its class files, as `index` writes them)
    similarity(tmp_path / "class", out=tmp_path / "fresh")
    assert not (tmp_path / "fresh" / "index.html").exists()
    check_folders(tmp_path / "class", tmp_path / "fresh")  # a grade into it is no refusal
    _graded_out(tmp_path / "fresh", ["a", "b"])
    index(tmp_path / "fresh", exercises=[e])
    assert 'href="similarity.html"' in (tmp_path / "fresh" / "index.html").read_text()
    json.loads((tmp_path / "fresh" / "a" / "results.json").read_text())  # untouched


def test_a_copy_disguised_by_hand_is_flagged_with_its_source_alone(tmp_path):
    """tests/similarity/copied_by_hand.py: a copy a person disguised, among every independent
    solution of the exercise; handed in as a notebook, one function per cell."""
    import nbformat

    e = "strides_broadcasting"
    for style, source in independent_solutions(e).items():
        (tmp_path / "class" / style).mkdir(parents=True)
        (tmp_path / "class" / style / f"{e}.py").write_text(source)
    copied = COPIED_BY_HAND.read_text()
    cells = [nbformat.v4.new_code_cell(chunk) for chunk in copied.split("\n\n\n")]
    (tmp_path / "class" / "nb").mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=cells), tmp_path / "class" / "nb" / f"{e}.ipynb")
    summary = similarity(tmp_path / "class", out=tmp_path / "out")
    assert [(p.a, p.b) for p in summary.flagged] == [("nb", "recursive")]
    assert summary.flagged[0].similarity > 0.9
    page = (tmp_path / "out" / "similarity.html").read_text()
    assert "strides_broadcasting.ipynb" in page


def test_an_lms_download_is_read_as_grade_reads_it(tmp_path):
    """A Canvas zip: the students are Canvas's user ids, staged into OUT/.lms as `grade` does."""
    e = "strides_broadcasting"
    files = {"ada_11_101": independent_solutions(e)["recursive"],
             "bo_12_102": COPIED_BY_HAND.read_text(),
             "cy_13_103": independent_solutions(e)["by_hand"]}
    with zipfile.ZipFile(tmp_path / "submissions.zip", "w") as z:
        for prefix, text in files.items():
            z.writestr(f"{prefix}_{e}.py", text)
    summary = similarity(tmp_path / "submissions.zip", out=tmp_path / "out")
    assert [(p.a, p.b) for p in summary.flagged] == [("11", "12")]
    assert sorted(p.name for p in (tmp_path / "out" / ".lms").iterdir()) == ["11", "12", "13"]


def test_the_release_notebook_untouched_is_starter_code_too(tmp_path):
    import nbformat

    from grader.release.notebooks import exercise_notebook

    e = "strides_broadcasting"
    for sid in ("nb1", "nb2", "py"):
        (tmp_path / "class" / sid).mkdir(parents=True)
    for sid in ("nb1", "nb2"):
        nbformat.write(exercise_notebook(e), tmp_path / "class" / sid / f"{e}.ipynb")
    (tmp_path / "class" / "py" / f"{e}.py").write_text(stub(e))
    summary = similarity(tmp_path / "class", out=tmp_path / "out")
    assert summary.pairs and summary.notes == []
    assert all(p.similarity == 0 and not p.flagged for p in summary.pairs)


def test_a_student_named_after_the_page_is_not_overwritten(tmp_path):
    """A student folder `similarity.html` (or .csv) is an id with its dots escaped, as one named
    `index.html` is: its folder in OUT never stands where the page goes."""
    from grader.intake.students import find_students

    for name in ("similarity.html", "similarity.csv", "ok"):
        (tmp_path / "class" / name).mkdir(parents=True)
        (tmp_path / "class" / name / "strides_broadcasting.py").write_text(
            stub("strides_broadcasting"))
    ids = sorted(sid for sid, _ in find_students(tmp_path / "class"))
    assert ids == ["ok", "similarity%2Ecsv", "similarity%2Ehtml"]
    similarity(tmp_path / "class", out=tmp_path / "out")
    assert (tmp_path / "out" / "similarity.html").is_file()


def test_a_long_passage_is_flagged_whatever_its_share():
    big, small = np.arange(0, 400, dtype=np.int64), np.arange(1000, 1400, dtype=np.int64)
    prints = {"a": big, "b": np.concatenate([big[:compare.MANY_SHARED], small]),
              "c": np.concatenate([big[:compare.MANY_SHARED - 1], small + 1000])}
    pairs = {(p.a, p.b): p for p in compare_class("x", prints)}
    assert pairs["a", "b"].similarity < compare.THRESHOLD and pairs["a", "b"].flagged
    assert not pairs["a", "c"].flagged


def test_without_the_library_the_command_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    from grader.commands import similarity as command

    (tmp_path / "class" / "a").mkdir(parents=True)
    monkeypatch.setattr(command, "library_missing", lambda: True)
    code = cli.main(["similarity", str(tmp_path / "class"), "--out", str(tmp_path / "out")])
    assert code == 2
    assert "pip install 'torchgrade[similarity]'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
