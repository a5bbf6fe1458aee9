"""Bulk start-up (issue 21): the grading processes' zygotes are forked from one zygote template
per run, which imported torch once. A forked zygote must hold everything a launched one does:
the same isolation level and self-test, workers that cannot see another zygote's scratch, a
fallback to a launch when the template is gone (with no verdict lost), and no template left
once the run is over, even after a kill -9 of the run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import EXERCISES, SOLUTIONS, cmdline
from grader.models import ModuleSource, SourceChunk
from grader.checking.student import StudentModule
from grader.intake.submission import load_submission
from grader.worker import sandbox
from grader.worker.client import ForkedProcess, Zygote, ZygoteTemplate, children
from grader.worker.limits import WorkerLimits
from mutants import mutants_of

pytestmark = pytest.mark.skipif(not (sandbox.is_root() and sandbox.bwrap_works()),
                                reason="a zygote template needs root and bubblewrap")

FAST = WorkerLimits(call_timeout=5.0, load_timeout=10.0)
EXERCISE = "strides_broadcasting"
SOLUTION = (SOLUTIONS / f"{EXERCISE}.py").read_text()
STUB = (EXERCISES / f"{EXERCISE}.py").read_text()


def module_of(zygote: Zygote, code: str) -> StudentModule:
    chunks = [SourceChunk(code=code, filename="m.py", label="m.py")]
    source = ModuleSource(exercise="m", path="m.py", kind="py", chunks=chunks)
    return StudentModule("m", source, spawn=zygote.spawn, limits=FAST)


def wait_until(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def alive(pid: int) -> bool:
    """Running (a zombie is not: it only waits to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False



def tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children(p)
    return out


def template_pids() -> list[int]:
    """Every running template process on the machine (its python, inside bwrap)."""
    return [int(e) for e in os.listdir("/proc") if e.isdigit() and alive(int(e))
            and "-m grader.worker.template" in cmdline(int(e))
            and "bwrap" not in cmdline(int(e)).split()[0]]


@pytest.fixture(scope="module")
def template():
    with ZygoteTemplate() as t:
        yield t


# --------------------------------------------------------------------------- one zygote


def test_a_forked_zygote_reports_what_a_launched_one_does(template, tmp_path):
    secret = tmp_path / "submissions"
    secret.mkdir()
    with Zygote(hidden=[secret], template=template.link()) as forked, \
            Zygote(hidden=[secret]) as launched:
        assert isinstance(forked.process, ForkedProcess)  # really from the template
        assert not isinstance(launched.process, ForkedProcess)
        assert Path(template.scratch_root) in Path(forked.scratch_root).parents
        assert (forked.isolation, forked.missing, forked.memory) == \
            (launched.isolation, launched.missing, launched.memory)
        assert (forked.contained, forked.leaks, forked.cgroups, forked.threads) == \
            (launched.contained, launched.leaks, launched.cgroups, launched.threads)
        assert forked.isolation == "full" and forked.threads == 1


def test_zygotes_that_train_come_from_the_trainer_with_torch_dynamo():
    """Zygotes of exercises that build no optimizer are forked by the template at once, with
    torch._dynamo deferred; those that may build one by its trainer, which imported it: the
    first exercises of a run do not wait for that import, the others never import it per
    worker."""
    code = ("import sys\n"
            "def dynamo():\n"
            "    return type(sys.modules.get('torch._dynamo')).__name__\n")
    seen = {}
    with ZygoteTemplate() as template, \
            Zygote(template=template.link(), optimizers=False) as plain:
        link = template.link()
        # No trainer until a zygote of exercises that train is asked for (a run whose
        # exercises build no optimizer never imports torch._dynamo).
        assert children(parent_of(plain.process.pid)) == [plain.process.pid]
        with Zygote(template=link) as trainer:
            for name, zygote in (("plain", plain), ("trainer", trainer)):
                assert isinstance(zygote.process, ForkedProcess)
                assert zygote.isolation == "full"
                sub = module_of(zygote, code)
                try:
                    seen[name] = sub.call("dynamo")
                finally:
                    sub.close()
            # Two templates forked them: the trainer is the template's child.
            assert parent_of(plain.process.pid) != parent_of(trainer.process.pid)
            assert parent_of(parent_of(trainer.process.pid)) == parent_of(plain.process.pid)
    assert seen == {"plain": "DeferredDynamo", "trainer": "module"}


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def test_the_self_test_of_a_forked_zygote_looks_at_the_templates_view(template):
    """The pool's scratch folder is in the template's view: a path to hide there must be
    reported as seen (the self-test proves the real view, not a nominal one), and the isolation
    level drops accordingly."""
    planted = Path(template.scratch_root) / "planted-secret"
    planted.write_text("an answer")
    try:
        with Zygote(hidden=[planted], template=template.link()) as forked:
            assert isinstance(forked.process, ForkedProcess)
            assert str(planted) in forked.leaks and forked.isolation == "reduced"
    finally:
        planted.unlink()


def test_a_worker_cannot_see_another_zygotes_scratch(template):
    link = template.link()
    with Zygote(template=link) as one, Zygote(template=link) as two:
        assert isinstance(one.process, ForkedProcess) and isinstance(two.process, ForkedProcess)
        writer = module_of(one, "import os\n"
                                "def write():\n"
                                "    open('note.txt', 'w').write('mine')\n"
                                "    return os.getcwd()\n")
        reader = module_of(two, "import os\n"
                                "def look(paths):\n"
                                "    seen = {}\n"
                                "    for p in paths:\n"
                                "        try:\n"
                                "            seen[p] = sorted(os.listdir(p)) if os.path.isdir(p)"
                                " else open(p).read()\n"
                                "        except OSError as e:\n"
                                "            seen[p] = type(e).__name__\n"
                                "    return seen, os.getcwd()\n")
        try:
            where = writer.call("write")
            assert Path(one.scratch_root) in Path(where).parents
            targets = [template.scratch_root, one.scratch_root, where, f"{where}/note.txt"]
            seen, own = reader.call("look", targets)
            assert Path(two.scratch_root) in Path(own).parents
            assert all(v in ("PermissionError", "FileNotFoundError") for v in seen.values()), seen
            # Nor the pool's cgroups (the zygotes' and their workers'): unmounted in a worker.
            if template.cgroup is not None:
                seen, _ = reader.call("look", template.cgroup.dirs)
                assert all(v in ([], "FileNotFoundError") for v in seen.values()), seen
        finally:
            writer.close()
            reader.close()


def test_each_forked_zygote_has_its_own_tmp(template):
    """A launched zygote has its own view's /tmp and /dev/shm; forked ones must not share
    theirs either (a worker that is not contained uses its zygote's)."""
    with Zygote(template=template.link()) as one, Zygote(template=template.link()) as two:
        for folder in ("tmp", "dev/shm"):
            mark = Path(f"/proc/{one.process.pid}/root/{folder}/torchgrade-mark")
            mark.write_text("one")
            assert not Path(f"/proc/{two.process.pid}/root/{folder}/torchgrade-mark").exists()
        # and the pool's scratch folder, below /tmp, is still there for both
        for z in (one, two):
            assert Path(f"/proc/{z.process.pid}/root{z.scratch_root}").is_dir()


def test_a_dead_forked_zygote_is_restarted_from_the_template(template):
    with Zygote(template=template.link()) as zygote:
        first = zygote.process.pid
        zygote.process.kill()
        assert wait_until(lambda: not alive(first), 10)
        sub = module_of(zygote, "def ok():\n    return 'fine'\n")
        try:
            assert sub.call("ok") == "fine"
        finally:
            sub.close()
        assert isinstance(zygote.process, ForkedProcess) and zygote.process.pid != first


def test_without_its_template_a_zygote_is_launched_and_forked_ones_live_on(tmp_path):
    with ZygoteTemplate() as dying:
        link = dying.link()
        with Zygote(template=link) as forked:
            assert isinstance(forked.process, ForkedProcess)
            inner = [p for p in children(dying.process.pid)]
            dying.process.kill()
            dying.process.wait()
            assert wait_until(lambda: not any(alive(p) for p in inner), 10)
            # A zygote forked before lives on with its workers...
            sub = module_of(forked, "def ok():\n    return 'still here'\n")
            try:
                assert sub.call("ok") == "still here"
            finally:
                sub.close()
            # ... and one asked for after is launched, with the same isolation.
            with Zygote(template=link) as after:
                assert not isinstance(after.process, ForkedProcess)
                assert after.isolation == forked.isolation == "full"
                # Its restart is a launch too.
                after.process.kill()
                again = module_of(after, "def ok():\n    return 'relaunched'\n")
                try:
                    assert again.call("ok") == "relaunched"
                finally:
                    again.close()
    assert not os.path.exists(dying.scratch_root)


# --------------------------------------------------------------------------- a pool


def pool_run(tmp_path: Path, name: str, *, template: bool, on_result=None):
    from grader.grading.steps import STEPS
    from grader.intake.assignment import from_exercises
    from grader.running.pool import GradeTask, PoolSettings, grade_in_pool

    mutant = mutants_of(EXERCISE)[0].source()
    sources = {"ann": SOLUTION, "bob": mutant, "cat": STUB, "dan": SOLUTION}
    subs = tmp_path / "subs"
    if not subs.exists():
        for student, source in sources.items():
            (subs / student).mkdir(parents=True)
            (subs / student / f"{EXERCISE}.py").write_text(source)
    tasks = [GradeTask(submission=load_submission(subs / s, exercises=[EXERCISE], student=s),
                       fingerprint=f"fp-{s}") for s in sources]
    settings = PoolSettings(out=tmp_path / name, exercises=[EXERCISE],
                            assignment=from_exercises([EXERCISE]))
    results = grade_in_pool(tasks, settings=settings, steps=STEPS, jobs=2, on_result=on_result,
                            template=template)
    return {r.student: (r.score, [(c.id, c.status, c.points, c.message) for c in r.checks])
            for r in results}


@pytest.mark.parametrize("when", ["at once", "at the first result"])
def test_a_killed_template_costs_no_verdict(tmp_path, monkeypatch, when):
    """Killed before any zygote is forked, every grading process launches its own; killed
    mid-run, the zygotes forked from it live on. Either way the verdicts are those of a run
    without a template."""
    started: list[ZygoteTemplate] = []
    inner: list[int] = []
    real_start = ZygoteTemplate.start

    def kill(t: ZygoteTemplate) -> None:
        inner.extend(tree(t.process.pid))  # bwrap and below (all of it the template's)
        t.process.kill()
        t.process.wait()

    def recorded(*args, **kwargs):
        t = real_start(*args, **kwargs)
        started.append(t)
        if when == "at once":
            # Once the template runs (bwrap's child has made the view and asked to die with
            # bwrap): killed earlier, while bwrap makes that child, the child may not have
            # asked yet (see `ZygoteTemplate.close`), which is bwrap's race, not the pool's.
            assert wait_until(lambda: any("-m grader.worker.template" in cmdline(p)
                                          for p in tree(t.process.pid)), 30)
            kill(t)
        return t

    monkeypatch.setattr(ZygoteTemplate, "start", recorded)

    launched: list[str] = []

    def at_first_result(result):
        if when == "at once" and not launched:  # every grading process launched its zygote
            launched.extend(c for c in map(cmdline, tree(os.getpid()))
                            if "-m grader.worker.zygote" in c)
            assert launched
        if when != "at once" and not inner:
            kill(started[0])
            assert any("-m grader.worker.template" in cmdline(p) for p in inner)
            assert len(inner) >= 4  # bwrap, the template and the zygotes forked from it

    with_kill = pool_run(tmp_path, "killed", template=True, on_result=at_first_result)
    assert started and inner
    assert wait_until(lambda: not any(alive(p) for p in inner), 10)
    assert not os.path.exists(started[0].scratch_root)
    plain = pool_run(tmp_path, "plain", template=False)
    assert with_kill == plain and len(plain) == 4
    assert plain["ann"][0] > 0 and plain["cat"][0] == 0


def test_no_template_outlives_a_run(tmp_path, monkeypatch):
    seen: list[int] = []
    real_start = ZygoteTemplate.start

    def recorded(*args, **kwargs):
        t = real_start(*args, **kwargs)
        seen.append(t.process.pid)
        return t

    monkeypatch.setattr(ZygoteTemplate, "start", recorded)
    processes: dict[int, str] = {}
    results = pool_run(tmp_path, "out", template=True,
                       on_result=lambda r: processes.update({p: cmdline(p) for p in tree(seen[0])}))
    assert len(results) == 4 and seen
    assert any("-m grader.worker.template" in c for c in processes.values())  # it was used
    assert wait_until(lambda: not any(alive(p) for p in processes), 10)


def test_no_template_outlives_a_killed_run(tmp_path):
    subs = tmp_path / "subs"
    for i in range(8):
        (subs / f"s{i}").mkdir(parents=True)
        (subs / f"s{i}" / f"{EXERCISE}.py").write_text(SOLUTION if i % 2 else STUB)
    out = tmp_path / "out"
    before = set(template_pids())
    tmp = tmp_path / "tmp"  # what a kill -9 leaves (empty scratch folders) stays in there
    tmp.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "grader.cli", "grade", str(subs), "--out",
                             str(out), "-j", "2"], cwd=tmp_path, start_new_session=True,
                            env={**os.environ, "TMPDIR": str(tmp)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: any(out.glob("*/results.json")), 300), "no result in time"
        everything = tree(proc.pid)
        ours = [p for p in everything if p in set(template_pids()) - before]
        assert ours, "the run used no template"
        zygotes = [p for p in everything if "grader.worker" in cmdline(p)]
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # the parent only: the rest must die with it
        proc.wait()
    assert wait_until(lambda: not any(alive(p) for p in everything), 20), \
        [(p, cmdline(p)) for p in everything if alive(p)]
    assert ours and zygotes


def test_a_template_started_first_thing_is_closed_when_nothing_is_graded(tmp_path):
    """`torchgrade grade` starts its template before its own work (`grader.running.prestart`):
    a run that then grades nothing (every result up to date) ends it at exit, with its scratch
    folder, as a run that used it does."""
    subs = tmp_path / "subs"
    for i in range(2):
        (subs / f"s{i}").mkdir(parents=True)
        (subs / f"s{i}" / f"{EXERCISE}.py").write_text(STUB)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    command = [sys.executable, "-m", "grader.cli", "grade", str(subs), "--out",
               str(tmp_path / "out"), "-j", "2"]
    before = set(template_pids())
    for run in ("grades both", "grades neither"):
        done = subprocess.run(command, cwd=tmp_path, env={**os.environ, "TMPDIR": str(tmp)},
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (run, done.stdout, done.stderr)
        assert wait_until(lambda: not set(template_pids()) - before, 10), run
        assert not list(tmp.glob("torchgrade-pool-*")), run
    assert "up to date" in done.stdout + done.stderr
