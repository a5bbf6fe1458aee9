"""Grading on a Dask cluster (issue 20): `torchgrade grade --dask tcp://HOST:PORT` against real
`dask scheduler` and `dask worker` processes on 127.0.0.1 gives the results of a local run
(timings aside), resumes like one, survives a worker killed mid-run, and exits 2 with one line
when the scheduler is gone. A local run never imports dask. Every process started here is
killed (its whole process group) in a `finally`, and every wait is bounded."""

from __future__ import annotations

import os
from dataclasses import replace
from functools import partial
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import EXERCISES, SOLUTIONS
from grader.course.folder import default_root
from grader.models import SubmissionResult
from grader.outputs.writing import read_json
from mutants import mutants_of

distributed = pytest.importorskip("distributed", reason="the dask extra is not installed")

pytestmark = pytest.mark.slow

EXERCISE = "strides_broadcasting"
DASK = Path(sys.executable).parent / "dask"
START_TIMEOUT = 120.0
GRADE_TIMEOUT = 900


def torchgrade(*args, timeout=GRADE_TIMEOUT, **kwargs):
    return subprocess.run([sys.executable, "-m", "grader.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, **kwargs)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_class(root: Path, students: dict[str, str]) -> Path:
    for student, source in students.items():
        (root / student).mkdir(parents=True)
        (root / student / f"{EXERCISE}.py").write_text(source)
    return root


def small_class(root: Path, copies: int = 1) -> Path:
    """Solutions, stubs and two mutants (`copies` of each), one folder per student."""
    solution = (SOLUTIONS / f"{EXERCISE}.py").read_text()
    stub = (EXERCISES / f"{EXERCISE}.py").read_text()
    mutants = {m.name: m.source() for m in mutants_of(EXERCISE)}
    chosen = ["broadcast_shape_aligns_from_the_left", "c_strides_fortran_order"]
    students = {}
    for i in range(copies):
        students[f"solution{i}"] = solution
        students[f"stub{i}"] = stub
        for name in chosen:
            students[f"{name[:20]}{i}"] = mutants[name]
    return write_class(root, students)


def comparable(result: SubmissionResult) -> dict:
    """Everything of a result but times (the host is in none of it)."""
    data = result.model_dump(mode="json", exclude={"graded_at", "grading_s", "checks_s"})
    for check in data["checks"]:
        check.pop("duration_s")
        check.pop("stopped_at")  # where a timed-out call was: a sample, like its duration
    return data


def results_of(out: Path) -> dict[str, dict]:
    return {p.parent.name: comparable(read_json(p)) for p in sorted(out.glob("*/results.json"))}


class Cluster:
    """A `dask scheduler` and `dask worker`s on 127.0.0.1, each in its own process group."""

    def __init__(self, root: Path):
        self.root = root
        self.port = free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen] = []
        self.workers: list[subprocess.Popen] = []
        self.scheduler: subprocess.Popen | None = None

    def _start(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.root / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
        env = {**os.environ, "TMPDIR": str(self.root)}
        process = subprocess.Popen([str(DASK), *args], stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=env, cwd=self.root,
                                   start_new_session=True)
        log.close()
        self.processes.append(process)
        return process

    def start_scheduler(self) -> None:
        self.scheduler = self._start("scheduler", "scheduler", "--host", "127.0.0.1", "--port",
                                     str(self.port), "--no-dashboard")
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                assert self.scheduler.poll() is None, self.log("scheduler")
                time.sleep(0.2)
        raise AssertionError(f"the scheduler did not start: {self.log('scheduler')}")

    def start_workers(self, n: int) -> None:
        if not n:
            return
        for _ in range(n):
            self.workers.append(self._start(f"worker{len(self.workers)}", "worker",
                                            self.address, "--nworkers", "1", "--nthreads", "1",
                                            "--no-dashboard", "--host", "127.0.0.1"))
        with distributed.Client(self.address, timeout=30, set_as_default=False) as client:
            client.wait_for_workers(len(self.workers), timeout=START_TIMEOUT)

    def log(self, name: str) -> str:
        try:
            return (self.root / f"{name}.log").read_text()[-3000:]
        except OSError:
            return ""

    @staticmethod
    def kill(process: subprocess.Popen) -> None:
        """SIGKILL the process's whole group: a worker's nanny, its worker process and the
        grading processes under it."""
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            pass

    def stop(self) -> None:
        for process in self.processes:
            self.kill(process)


@contextmanager
def cluster(root: Path, workers: int):
    root.mkdir(parents=True, exist_ok=True)
    running = Cluster(root)
    try:
        running.start_scheduler()
        running.start_workers(workers)
        yield running
    finally:
        running.stop()


def test_dask_grades_like_a_local_run_and_resumes(tmp_path):
    subs = small_class(tmp_path / "class")
    local = torchgrade("grade", subs, "--out", tmp_path / "local", "--exercises", EXERCISE,
                       "-j", "2")
    assert local.returncode == 0, local.stderr
    with cluster(tmp_path / "cluster", workers=2) as running:
        remote = torchgrade("grade", subs, "--out", tmp_path / "dask", "--exercises", EXERCISE,
                            "--dask", running.address)
        assert remote.returncode == 0, remote.stderr + running.log("worker0")
        assert "Graded 4 submissions in" in remote.stdout
        # Every result, check by check (scores, statuses, messages, notes, fingerprints).
        expected, got = results_of(tmp_path / "local"), results_of(tmp_path / "dask")
        assert sorted(got) == sorted(expected) == sorted(p.name for p in subs.iterdir())
        for student in expected:
            assert got[student] == expected[student], student
        for student in expected:  # the reports came back too (not re-rendered here)
            assert (tmp_path / "dask" / student / "report.html").stat().st_size > 1000
            assert (tmp_path / "dask" / student / "gradescope.json").is_file()
        assert (tmp_path / "dask" / "index.html").is_file()
        assert (tmp_path / "dask" / "grades.csv").read_text() == \
            (tmp_path / "local" / "grades.csv").read_text()
        # Resumable as a local run: nothing is sent again, and a changed file is regraded.
        again = torchgrade("grade", subs, "--out", tmp_path / "dask", "--exercises", EXERCISE,
                           "--dask", running.address)
        assert again.returncode == 0, again.stderr
        assert "0 graded now, 4 up to date" in again.stdout
        (subs / "stub0" / f"{EXERCISE}.py").write_text((SOLUTIONS / f"{EXERCISE}.py").read_text())
        changed = torchgrade("grade", subs, "--out", tmp_path / "dask", "--exercises", EXERCISE,
                             "--dask", running.address)
        assert "1 graded now, 3 up to date" in changed.stdout, changed.stderr
        stub = read_json(tmp_path / "dask" / "stub0" / "results.json")
        assert stub.score == stub.max_score > 0
        # The grade it replaced is kept and said, as a local run's writer does.
        assert "The grades they replaced" in changed.stdout
        previous = read_json(tmp_path / "dask" / "stub0" / "results.previous.json")
        assert previous.score == 0 and stub.replaced is not None
        assert stub.replaced.final_score == 0
        assert "Regraded" in (tmp_path / "dask" / "stub0" / "report.html").read_text()


def test_a_worker_killed_mid_run_costs_only_a_retry(tmp_path):
    subs = small_class(tmp_path / "class", copies=3)  # 12 submissions
    out = tmp_path / "dask"
    with cluster(tmp_path / "cluster", workers=2) as running:
        grading = subprocess.Popen([sys.executable, "-m", "grader.cli", "grade", str(subs),
                                    "--out", str(out), "--exercises", EXERCISE,
                                    "--dask", running.address],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   start_new_session=True)
        try:
            # Kill a worker once grading is under way (some results in, most not).
            deadline = time.monotonic() + GRADE_TIMEOUT
            while not list(out.glob("*/results.json")) and time.monotonic() < deadline:
                assert grading.poll() is None, grading.communicate()
                time.sleep(0.2)
            done_before = len(list(out.glob("*/results.json")))
            assert done_before < 12
            running.kill(running.workers[0])
            stdout, stderr = grading.communicate(timeout=GRADE_TIMEOUT)
        finally:
            Cluster.kill(grading)
    assert grading.returncode == 0, stderr
    assert "Graded 12 submissions in" in stdout, stdout + stderr
    results = {p.parent.name: read_json(p) for p in out.glob("*/results.json")}
    assert len(results) == 12
    for student, result in results.items():
        assert result.fingerprint, f"{student}: a grader failure"
        if student.startswith("solution"):
            assert result.score == result.max_score > 0
        if student.startswith("stub"):
            assert result.score == 0


def test_an_unreachable_scheduler_exits_2_with_one_line(tmp_path):
    subs = small_class(tmp_path / "class")
    with cluster(tmp_path / "cluster", workers=0) as running:
        address = running.address
        running.kill(running.scheduler)  # stopped: nothing listens at its address any more
        started = time.monotonic()
        proc = torchgrade("grade", subs, "--out", tmp_path / "out", "--exercises", EXERCISE,
                          "--dask", address, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and address in lines[0], proc.stderr
    assert lines[0].startswith("torchgrade: error: cannot reach the Dask scheduler")
    assert time.monotonic() - started < 60
    assert not list((tmp_path / "out").glob("*/results.json"))
    bad = torchgrade("grade", subs, "--out", tmp_path / "out", "--dask", "not-an-address",
                     timeout=120)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_a_scheduler_lost_mid_run_exits_2_with_one_line_and_keeps_what_was_graded(tmp_path):
    subs = small_class(tmp_path / "class", copies=2)  # 8 submissions
    out = tmp_path / "out"
    with cluster(tmp_path / "cluster", workers=1) as running:
        grading = subprocess.Popen([sys.executable, "-m", "grader.cli", "grade", str(subs),
                                    "--out", str(out), "--exercises", EXERCISE,
                                    "--dask", running.address],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   start_new_session=True)
        try:
            deadline = time.monotonic() + GRADE_TIMEOUT
            while not list(out.glob("*/results.json")) and time.monotonic() < deadline:
                assert grading.poll() is None, grading.communicate()
                time.sleep(0.2)
            running.kill(running.scheduler)
            stdout, stderr = grading.communicate(timeout=120)
        finally:
            Cluster.kill(grading)
    assert grading.returncode == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("torchgrade: error: lost the Dask "
                                                   "scheduler"), stderr
    kept = list(out.glob("*/results.json"))
    assert 1 <= len(kept) < 8 and (out / "index.html").is_file()
    assert all(read_json(p).fingerprint for p in kept)


def test_a_local_run_never_imports_dask():
    code = ("import sys, grader.cli, grader.commands.grade, grader.grading.run, "
            "grader.running.pool, grader.running.remote, grader.running.batch\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed'))\n"
            "assert not bad, bad\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr


# --------------------------------------------------------------------------- the worker's side
# Without a cluster: the station a Dask worker keeps, with a stand-in for its grading process.


def remote_job(tmp_path: Path, student: str = "ann", grader: str | None = None):
    from grader.grading.steps import STEPS
    from grader.intake.assignment import from_exercises
    from grader.intake.fingerprint import grader_digest
    from grader.models import Submission
    from grader.running.pool import GradeTask, PoolSettings
    from grader.running.remote import RemoteJob

    settings = PoolSettings(out=tmp_path / "out", exercises=[EXERCISE],
                            assignment=from_exercises([EXERCISE]))
    task = GradeTask(submission=Submission(student=student, root=student), fingerprint="f")
    return RemoteJob(task=task, settings=settings, steps=STEPS,
                     grader=grader or grader_digest(), key="k")


class DyingProcess:
    """A grading process whose every attempt dies (as if the kernel killed it)."""

    started_count = 0

    def __init__(self, settings, steps):
        DyingProcess.started_count += 1
        self.process = self

    def poll(self):
        return None

    def started(self):
        from grader.running.pool import SandboxStarted

        return SandboxStarted("full", "")

    def grade(self, task):
        from grader.running.remote import ProcessDied

        raise ProcessDied("killed by SIGKILL")

    def close(self):
        pass


def test_a_grading_process_that_dies_twice_is_reported_not_retried_forever(tmp_path,
                                                                             monkeypatch):
    from grader.running import remote

    monkeypatch.setattr(remote, "GradingProcess", DyingProcess)
    DyingProcess.started_count = 0
    station = remote.Station()
    try:
        outcome = station.grade(remote_job(tmp_path), remote.CourseBundle.pack(
            default_root()))
    finally:
        station.close()
    assert outcome.died == "killed by SIGKILL" and not outcome.files and not outcome.broken
    assert DyingProcess.started_count == remote.MAX_ATTEMPTS == 2


def test_a_worker_with_another_grader_refuses_to_grade(tmp_path, monkeypatch):
    from grader.running import remote

    monkeypatch.setattr(remote, "GradingProcess", DyingProcess)
    DyingProcess.started_count = 0
    station = remote.Station()
    try:
        outcome = station.grade(remote_job(tmp_path, grader="another"),
                                remote.CourseBundle.pack(
                                    default_root()))
    finally:
        station.close()
    assert outcome.broken and "differs from the client's" in outcome.broken
    assert DyingProcess.started_count == 0  # nothing graded with the wrong grader


def test_the_client_writes_only_the_outputs_of_the_submission_it_sent(tmp_path):
    from grader.grading.writer import write_into
    from grader.running.dask_cluster import write_outcome
    from grader.running.remote import RemoteOutcome
    from grader.scoring.results import grader_failure

    task = remote_job(tmp_path, student="ann").task
    other = grader_failure("bob", "x").model_dump_json()
    files = {"report.html": "<p>", "gradescope.json": "{}", "results.json": other}
    def write(result, files):
        write_into(tmp_path / "out", result, files)

    with pytest.raises(ValueError):
        write_outcome(RemoteOutcome("ann", files=files), task, write)
    with pytest.raises(ValueError):  # an incomplete reply
        write_outcome(RemoteOutcome("ann", files={"results.json": other}), task, write)
    assert not (tmp_path / "out").exists()
    mine = grader_failure("ann", "x").model_dump_json(indent=2)
    result = write_outcome(RemoteOutcome("ann", files={**files, "results.json": mine}), task,
                           write)
    assert result.student == "ann"
    assert (tmp_path / "out" / "ann" / "results.json").read_text() == mine


def test_a_course_bundle_unpacks_to_the_same_files(tmp_path):
    from grader.running.remote import CourseBundle

    course = Path(__file__).parents[1]
    bundle = CourseBundle.pack(course)
    assert CourseBundle.pack(course).digest == bundle.digest  # times do not count
    unpacked = bundle.unpack(tmp_path)
    assert bundle.unpack(tmp_path) == unpacked  # once per digest
    assert CourseBundle.pack(unpacked).digest == bundle.digest
    assert (unpacked / "course.toml").read_bytes() == (course / "course.toml").read_bytes()


def test_a_worker_sees_the_course_the_client_fingerprints(tmp_path):
    """The worker's grader digest of the unpacked course equals the client's, hidden folders
    and linked files included (else every worker would refuse to grade)."""
    import shutil

    from grader.course.location import COURSE_FOLDERS, COURSE_ROOT_FILES
    from grader.intake.fingerprint import _digest
    from grader.running.remote import CourseBundle

    course = tmp_path / "course"
    for part in [p for p in COURSE_FOLDERS if (default_root() / p).is_dir()]:
        shutil.copytree(default_root() / part, course / part,
                        ignore=shutil.ignore_patterns("__pycache__"))
    for name in COURSE_ROOT_FILES:
        shutil.copy(default_root() / name, course / name)
    (course / "checks" / ".ipynb_checkpoints").mkdir()
    (course / "checks" / ".ipynb_checkpoints" / "helper-checkpoint.py").write_text("x = 1\n")
    (course / "solutions" / "linked.py").symlink_to(course / "solutions" /
                                                    f"{EXERCISE}.py")
    unpacked = CourseBundle.pack(course).unpack(tmp_path / "worker")
    assert _digest(unpacked.resolve()) == _digest(course.resolve())


class WorkingProcess(DyingProcess):
    """A grading process that grades (a grader failure: nothing to run) and can be closed."""

    made: list[WorkingProcess] = []

    def __init__(self, settings, steps):
        super().__init__(settings, steps)
        self.closed = False
        WorkingProcess.made.append(self)

    def grade(self, task):
        from grader.running.pool import Graded
        from grader.scoring.results import grader_failure

        return Graded(grader_failure(task.student, "x"))

    def close(self):
        self.closed = True


def test_a_worker_keeps_its_grading_process_for_a_run_and_stops_it_for_another(tmp_path,
                                                                                monkeypatch):
    from dataclasses import replace

    from grader.running import remote

    monkeypatch.setattr(remote, "GradingProcess", WorkingProcess)
    WorkingProcess.made = []
    station = remote.Station()
    course = remote.CourseBundle.pack(default_root())
    try:
        first = remote_job(tmp_path)
        for student in ("ann", "bob"):  # the same run: the same warm process
            job = replace(first, task=first.task.model_copy(update={"student": student}))
            assert not station.grade(job, course).broken
        assert len(WorkingProcess.made) == 1 and not WorkingProcess.made[0].closed
        other_run = replace(first, key="another run")  # other settings: a process of its own
        assert not station.grade(other_run, course).broken
        assert len(WorkingProcess.made) == 2
        assert WorkingProcess.made[0].closed and not WorkingProcess.made[1].closed
    finally:
        station.close()
    assert WorkingProcess.made[1].closed and not station.root.exists()


def test_the_benchmark_is_documented_and_runs_its_help():
    from conftest import REPO

    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_dask.py"), "--help"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "-n N" in proc.stdout and "--exercises" in proc.stdout
    assert "benchmarks/bench_dask.py" in (REPO / "docs" / "operations.md").read_text()


@pytest.mark.fast
def test_the_clients_window_is_bounded_by_the_source_it_holds(tmp_path):
    """The client holds each submission in the cluster, read, until its result is back: the
    window stops taking more once they hold WINDOW_BYTES (one more at most), however many
    worker threads there are."""
    from grader.models import ModuleSource, SourceChunk, Submission
    from grader.running import dask_cluster

    class Client:
        def __init__(self):
            self.submitted = 0

        def submit(self, *args, **kwargs):
            self.submitted += 1
            return object()

        def scheduler_info(self):
            return {"workers": {"w": {"nthreads": 64}}}

    def loaded(size: int) -> Submission:
        chunk = SourceChunk(code="x" * size, filename="m.py", label="m.py")
        return Submission(student="s", root="s", modules={EXERCISE: ModuleSource(
            exercise=EXERCISE, path="m.py", kind="py", chunks=[chunk])})

    job = remote_job(tmp_path)
    for size, expected in ((dask_cluster.WINDOW_BYTES // 4, 4), (1 << 10, 256)):
        client = Client()
        run = dask_cluster._Run(client, None, job.settings, job.steps, lambda r, f: None,
                                None, None)
        pending = [job.task] * 1000
        big = replace(job, task=job.task.model_copy(update={"submission": loaded(size)}))
        run._fill(pending, partial(lambda job, task: job, big), set())
        assert client.submitted == expected
