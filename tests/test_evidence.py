"""Typed contracts between steps (issue 16), fast and without a sandbox:

- every evidence key a check (or the grader) writes and every key a reader (diagnosis rules,
  report pictures, report facts) names is declared once, in `grader.evidence.E` (the grader's
  own) or in the shipped curriculum's `checks/diagnoses.py` (its own), with the modules that
  write it; a value of another type, or an undeclared key, is caught where a
  check's evidence is recorded (`grader.checking.plugin.check_evidence`);
- decisions about why a check did not pass read `CheckResult.reason`, never message text;
- one table (`grader.outputs.outcomes`) says how each outcome is shown in terminal, reports,
  summary.

The scan reads the source (ast), so that a key written on a path no test grades is found too;
`check_evidence` catches at run time what the scan cannot see (keys made at run time).
"""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

from conftest import CHECKS_DIR
from grader import evidence
from grader.course.folder import default_course
from grader.course.knowledge import diagnoses_module, knowledge
from grader.evidence import KEYS as GENERIC_KEYS
from grader.models import CheckResult

pytestmark = pytest.mark.fast  # no sandbox: part of `pytest -m fast`

GRADER = Path(evidence.__file__).resolve().parent
KEYS = knowledge().keys  # the grader's and the shipped curriculum's
E = diagnoses_module(default_course()).E  # the curriculum's keys, the grader's inherited
READERS = (CHECKS_DIR / "diagnoses.py", GRADER / "outputs" / "plots.py",
           GRADER / "outputs" / "report.py")


# --------------------------------------------------------------------------- the scan


def sources() -> list[Path]:
    """Every module of the grader (probes, worker included) but the declaration, and the
    shipped curriculum's checks and probes."""
    return sorted([p for p in GRADER.rglob("*.py") if p.name != "evidence.py"]
                  + list(CHECKS_DIR.glob("*.py"))
                  + list((CHECKS_DIR.parent / "probes").glob("*.py")))


def _literal_keys(node: ast.AST, module: ast.Module) -> list[str] | None:
    """The string keys a dict expression holds: a literal, dict(k=...), a call of a function of
    the same module that returns literals, or {f"prefix{k}": v for k, v in d.items()} over such
    a call. None when they cannot be known from the source."""
    if isinstance(node, ast.Dict):
        if all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.keys):
            return [k.value for k in node.keys]
        return None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id == "dict" and not node.args:
            return [k.arg for k in node.keywords if k.arg]
        fn = next((f for f in module.body if isinstance(f, ast.FunctionDef)
                   and f.name == node.func.id), None)
        if fn is None:
            return None
        keys: list[str] = []
        for ret in (n for n in ast.walk(fn) if isinstance(n, ast.Return)):
            found = _literal_keys(ret.value, module) if ret.value is not None else None
            if found is None:
                return None
            keys += found
        return keys
    if isinstance(node, ast.DictComp) and isinstance(node.key, ast.JoinedStr):
        parts = node.key.values
        gen = node.generators[0]
        if (len(parts) == 2 and isinstance(parts[0], ast.Constant)
                and isinstance(gen.iter, ast.Call) and isinstance(gen.iter.func, ast.Attribute)
                and gen.iter.func.attr == "items" and isinstance(gen.iter.func.value, ast.Name)):
            source = _assigned(module, gen.iter.func.value.id)
            inner = _literal_keys(source, module) if source is not None else None
            return None if inner is None else [parts[0].value + k for k in inner]
    return None


def _assigned(module: ast.Module, name: str) -> ast.AST | None:
    """The value last assigned to `name` anywhere in `module` (a local, in practice)."""
    value = None
    for node in ast.walk(module):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                                for t in node.targets):
            value = node.value
        elif (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
              and node.target.id == name):
            value = node.value
    return value


def _evidence_names(module: ast.Module) -> set[str]:
    """Names that hold an evidence dict: `evidence`, and any passed as `evidence=`."""
    names = {"evidence"}
    for node in ast.walk(module):
        if isinstance(node, ast.keyword) and node.arg == "evidence" and isinstance(
                node.value, ast.Name):
            names.add(node.value.id)
    return names


def _is_evidence(node: ast.AST, names: set[str]) -> bool:
    return (isinstance(node, ast.Name) and node.id in names) or (
        isinstance(node, ast.Attribute) and node.attr == "evidence")


def writes(path: Path) -> tuple[dict[str, list[int]], list[str]]:
    """({key: lines} written in the module at `path}, [writes whose keys the scan cannot
    know]). Writes: d["k"] = ..., d.setdefault("k", ...), d.update(k=...) / d.update({...}),
    evidence={...} in a call, and a dict assigned to a name that holds evidence."""
    module = ast.parse(path.read_text(encoding="utf-8"))
    names = _evidence_names(module)
    found: dict[str, list[int]] = {}
    unknown: list[str] = []

    def copies(node: ast.AST) -> bool:
        """A value made from another evidence dict (the plumbing that carries evidence from
        a check to its result; the dict a check's `evidence` fixture gave it, read from the
        item's stash by EVIDENCE_KEY, whose keys were written, and scanned, in the check), or a
        model's field declaration: no key is made there."""
        return any(_is_evidence(n, names) or (isinstance(n, ast.Constant) and n.value ==
                   "evidence") or (isinstance(n, ast.Name) and n.id in ("Field", "EVIDENCE_KEY"))
                   for n in ast.walk(node))

    def add(keys: list[str] | None, node: ast.AST, value: ast.AST | None = None) -> None:
        if keys is None and value is not None and copies(value):
            return
        if keys is None:
            unknown.append(f"{path.name}:{node.lineno}: {ast.unparse(node)[:80]}")
        for key in keys or []:
            found.setdefault(key, []).append(node.lineno)

    for node in ast.walk(module):
        if (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store)
                and _is_evidence(node.value, names)):
            ok = isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)
            add([node.slice.value] if ok else None, node)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and _is_evidence(node.func.value, names)):
            if node.func.attr == "update":
                add([k.arg for k in node.keywords if k.arg], node)
                for arg in node.args:
                    add(_literal_keys(arg, module), node, arg)
            elif node.func.attr == "setdefault":
                ok = isinstance(node.args[0], ast.Constant)
                add([node.args[0].value] if ok else None, node)
        elif isinstance(node, ast.keyword) and node.arg == "evidence" and not _is_evidence(
                node.value, names):
            add(_literal_keys(node.value, module), node.value, node.value)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(_is_evidence(t, names) for t in targets):
                add(_literal_keys(node.value, module), node, node.value)
    return found, unknown


def reads(path: Path) -> tuple[set[str], list[str]]:
    """({names of `E.<name>` in the module}, [evidence read by a string there])."""
    module = ast.parse(path.read_text(encoding="utf-8"))
    names = _evidence_names(module) | {"check"}
    named = {n.attr for n in ast.walk(module) if isinstance(n, ast.Attribute)
             and isinstance(n.value, ast.Name) and n.value.id == "E"}
    by_string = []  # evidence[...] or evidence.get(...): a key named by a string
    for node in ast.walk(module):
        if (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
                and _is_evidence(node.value, names)):
            by_string.append(f"{path.name}:{node.lineno}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("get", "pop", "setdefault")
              and _is_evidence(node.func.value, names)):
            by_string.append(f"{path.name}:{node.lineno}")
    return named, by_string


def written_by() -> dict[str, set[str]]:
    """{key: the modules (file stems) that write it}, over the whole grader."""
    out: dict[str, set[str]] = {}
    for path in sources():
        for key in writes(path)[0]:
            out.setdefault(key, set()).add(path.stem)
    return out


# --------------------------------------------------------------------------- (a) declared


def test_every_key_written_is_declared():
    undeclared = {key: sorted(mods) for key, mods in written_by().items() if key not in KEYS}
    assert not undeclared, f"declare these evidence keys in grader.evidence.E: {undeclared}"


def test_the_scan_sees_every_write():
    unknown = [u for path in sources() for u in writes(path)[1]]
    assert not unknown, ("evidence written with keys the scan cannot read from the source; "
                         f"write them as literals (or declare and scan them): {unknown}")


def test_declared_writers_are_the_modules_that_write():
    """A key of the grader's (`grader.evidence.E`) names the grader's modules that write it,
    one of the course's the course's check modules that do."""
    found = written_by()
    ours = {p.stem for p in GRADER.rglob("*.py")}

    def expected(key) -> set[str]:
        writers = found.get(key.name, set())
        return writers & ours if key.name in GENERIC_KEYS else writers - ours

    wrong = {key.name: (sorted(key.writers), sorted(expected(key)))
             for key in KEYS.values() if set(key.writers) != expected(key)}
    assert not wrong, f"(declared writers, modules found writing the key): {wrong}"


def test_readers_name_only_declared_keys_and_never_by_string():
    for name in READERS:
        named, by_string = reads(name)
        assert named <= set(KEYS), f"{name} reads undeclared evidence {named - set(KEYS)}"
        assert not by_string, f"{name} reads evidence by a string, not through E: {by_string}"


def test_the_scan_finds_what_it_looks_for(tmp_path):
    """The scan itself: each way of writing a key is seen, and an unreadable one is named."""
    path = tmp_path / "check_sample.py"
    path.write_text(
        "def stats():\n    return {'s_a': 1}\n"
        "def t(evidence, k):\n"
        "    evidence['k1'] = 1\n    evidence.update(k2=2)\n    evidence.setdefault('k3', [])\n"
        "    fail('x', evidence={'k4': 1})\n    timing = {'k5': 1}\n"
        "    fail('y', evidence=timing)\n"
        "    evidence.update(stats())\n    s = stats()\n"
        "    evidence.update({f'v_{a}': b for a, b in s.items()})\n"
        "    evidence[k] = 3\n    print(evidence['read'])\n", encoding="utf-8")
    found, unknown = writes(path)
    assert set(found) == {"k1", "k2", "k3", "k4", "k5", "s_a", "v_s_a"}
    assert len(unknown) == 1 and "evidence[k]" in unknown[0]
    named, by_string = reads(path)
    assert by_string == ["check_sample.py:6", "check_sample.py:14"]  # setdefault reads too


# --------------------------------------------------------------------------- (c) used


def test_every_key_has_a_writer_and_a_reader_or_is_shown_only():
    # grader.evidence reads one key itself, for the rules (`says`: E.error).
    read_names = set().union(*(reads(name)[0] for name in (*READERS, GRADER / "evidence.py")))
    drawn = {k.name for k in KEYS.values() if k.drawn}
    unread = [k.name for k in KEYS.values() if not k.shown_only and k.name not in read_names]
    assert not unread, f"declared as read, but no reader names them: {unread}"
    # shown_only must be true: a key a rule or a picture reads is not only shown
    read_anyway = [k.name for k in KEYS.values() if k.shown_only and k.name in read_names]
    assert not read_anyway, f"declared shown_only, but read: {read_anyway}"
    found = written_by()
    assert all(k.name in found for k in KEYS.values())
    # a key a picture draws is read by plots (its label and strides ride with the shapes)
    plots_read = reads(GRADER / "outputs" / "plots.py")[0]
    assert drawn - plots_read <= {"got_strides"}, drawn - plots_read


def test_report_leaves_out_as_facts_what_pictures_draw():
    from grader.outputs.report import DRAWN, evidence_facts

    assert "loss_curve" in DRAWN and "grad_errors" in DRAWN and "loss" not in DRAWN
    facts = dict(evidence_facts({"loss_curve": [1.0, 2.0], "diverged": True}))
    assert facts == {"diverged": "True"}


def test_each_key_is_declared_once_with_a_meaning():
    assert len(KEYS) == len({k.name for k in KEYS.values()})
    assert all(k.name and k.meaning for k in KEYS.values())
    assert E.loss_curve.name == "loss_curve" and E.loss_curve.get({"loss_curve": [1]}) == [1]


# --------------------------------------------------------------------------- (b) validated


def test_a_value_of_another_type_is_a_problem():
    assert evidence.problems({"diverged": True, "loss_curve": [1.0, None, "nan"],
                              "shapes": [(2, 3), [3]]}, KEYS) == []
    assert evidence.problems({"diverged": "yes"}, KEYS)[0].startswith(
        "evidence 'diverged' is not")
    assert E.loss_curve.problem("1, 2, 3") is not None
    assert E.steps_per_epoch.problem(2.5) is not None
    assert evidence.problems({"loss_crve": [1.0]}, KEYS) == [
        "evidence key 'loss_crve' is not declared (grader.evidence.E or the course's "
        "checks/diagnoses.py)"]
    # The grader's own keys alone know nothing of a course's.
    assert evidence.problems({"diverged": True}) != []


def recorded(**evidence_) -> CheckResult:
    return CheckResult(id="ex.c", exercise="ex", targets=["f"], visibility="visible", points=2,
                       max_points=2, status="passed", evidence=evidence_)


def test_recording_logs_a_wrong_type_and_keeps_the_result(caplog, monkeypatch):
    from grader.checking.plugin import STRICT_EVIDENCE, check_evidence

    monkeypatch.setenv(STRICT_EVIDENCE, "1")
    check = recorded(steps_per_epoch="three")
    with caplog.at_level(logging.WARNING, logger="torchgrade"):
        assert check_evidence(check) is check  # a value may come from student code
    assert "steps_per_epoch" in caplog.text and check.status == "passed"


def test_recording_an_undeclared_key_fails_the_check_in_strict_mode(caplog, monkeypatch):
    from grader.checking.plugin import STRICT_EVIDENCE, check_evidence

    monkeypatch.setenv(STRICT_EVIDENCE, "1")
    with caplog.at_level(logging.WARNING, logger="torchgrade"):
        got = check_evidence(recorded(loss_crve=[1.0]))
    assert got.status == "error" and got.points == 0 and "loss_crve" in got.message
    assert "loss_crve" in caplog.text
    monkeypatch.delenv(STRICT_EVIDENCE)
    check = recorded(loss_crve=[1.0])
    assert check_evidence(check) is check  # students' results never change for it


def test_the_collector_checks_the_evidence_it_records(tmp_path, monkeypatch):
    """A check run by pytest with the grader's collector (no student code: no worker) that
    records an undeclared key comes out as an internal error naming it."""
    from grader.checking.plugin import STRICT_EVIDENCE, ResultCollector

    monkeypatch.setenv(STRICT_EVIDENCE, "1")
    path = tmp_path / "test_sample.py"
    path.write_text("from grader.course.registry import check\n\n\n"
                    "@check(points=1, targets='f', visibility='visible')\n"
                    "def test_records(evidence):\n"
                    "    evidence['diverged'] = False\n"
                    "    evidence['loss_crve'] = [1.0]\n", encoding="utf-8")
    collector = ResultCollector()
    pytest.main([str(path), "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path)],
                plugins=[collector])
    [result] = collector.results
    assert result.status == "error" and "loss_crve" in result.message
    assert result.evidence == {"diverged": False, "loss_crve": [1.0]}


# --------------------------------------------------------------------------- reasons


def failing(reason=None, message="m", **fields) -> CheckResult:
    values = dict(id="ex.c", exercise="ex", targets=["f"], visibility="visible", points=0,
                  max_points=2, status="error", reason=reason, message=message)
    values.update(fields)
    return CheckResult(**values)


def test_fix_first_puts_missing_files_last_by_reason_not_by_words():
    """Files not handed in come after what is wrong in the files handed in (issue 41); a
    message that only says a file is missing does not make it one."""
    from grader.outputs.report import to_fix_first

    missing = failing("not_submitted", "b.py is nowhere", id="b.c", exercise="b",
                      max_points=9)
    worded = failing(None, "file not submitted: said by the student's own code", id="a.c",
                     exercise="a", max_points=1, status="failed")
    assert [g[0].id for g in to_fix_first([missing, worded])] == ["a.c", "b.c"]


@pytest.mark.parametrize("reason, unlocked", [
    ("not_implemented", False), ("not_submitted", False), ("not_defined", False),
    # a module that does not compile or import, a check that failed itself: no function ran
    ("not_loaded", False), ("grader_error", False), (None, True)])
def test_solution_is_unlocked_by_reason_not_by_words(tmp_path, reason, unlocked):
    from grader.commands.solution import tried
    from grader.outputs.writing import write_json
    from grader.models import SubmissionResult

    # the message says "not implemented yet" whatever the reason: only the reason counts
    check = failing(reason, "f is not implemented yet; file not submitted; defines no f",
                    exercise="manual_backward")
    result = SubmissionResult(student="s", grader_version="t", checks=[check])
    write_json(result, tmp_path / "s" / "results.json")
    assert tried("manual_backward", tmp_path) is unlocked


def test_no_decision_reads_message_words():
    """The phrases a reason replaces appear in no comparison with a message any more."""
    for path in sources():
        text = path.read_text(encoding="utf-8")
        for phrase in ("not implemented yet\" in", "file not submitted\" in", "\"defines no \""):
            assert phrase not in text, f"{path.name} matches message words: {phrase}"


# --------------------------------------------------------------------------- one status table


def test_one_table_shows_every_outcome():
    from typing import get_args

    from grader.models import Status
    from grader.outputs.outcomes import OUTCOMES

    assert set(OUTCOMES) == set(get_args(Status)) | {"todo", "missing"}
    assert all(len(o.word) <= 9 for o in OUTCOMES.values())  # `[ PASSED  ]`
    # display words are spelled in the table only
    words = [o.word for o in OUTCOMES.values()] + [o.mark for o in OUTCOMES.values()] + [
        "raised an error"]
    for path in sources():
        if path.name == "outcomes.py":
            continue
        text = path.read_text(encoding="utf-8")
        spelled = [w for w in words if f'"{w}"' in text or f"'{w}'" in text]
        assert not spelled, f"{path.name} spells outcome displays itself: {spelled}"


def test_terminal_report_and_summary_show_the_table(monkeypatch):
    from grader.outputs import outcomes, summary, terminal
    from grader.models import ExerciseResult, SubmissionResult
    from grader.outputs.report import render_report

    monkeypatch.setitem(outcomes.OUTCOMES, "timeout", outcomes.Outcome(
        "ran out of time", "SLOW", "33", "*", "ran out of time", False, "timeout"))
    check = failing(status="timeout", message="f(x) timed out after 5 s.")
    result = SubmissionResult(student="s", grader_version="t", checks=[check],
                              exercises=[ExerciseResult(exercise="ex", score=0, max_score=2)])
    assert "[  SLOW   ]" in terminal.summary(result)
    html = render_report(result, draw=False)
    assert "ran out of time" in html and "1 ran out of time" in html
    assert not summary.is_broken(check)
