"""The adversarial corpus (tests/hostile.py) through `torchgrade grade`, in one batch with an
honest student: every verdict as expected, nothing left running, nothing reached the network, no
result overwritten, every report bounded, the whole batch finished."""

from __future__ import annotations

import csv
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from conftest import SOLUTIONS
from grader.outputs.writing import read_json
from hostile import EXERCISE, THREATS

REPORT_LIMIT = 3 << 20


class Listener:
    """A TCP server on the host's loopback that counts who connects."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.connections = 0
        self.server.settimeout(0.2)
        self._stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self._stop:
            try:
                conn, _ = self.server.accept()
                self.connections += 1
                conn.close()
            except OSError:
                pass

    def close(self):
        self._stop = True
        self.thread.join()
        self.server.close()


def processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(int(entry))
    return found


@pytest.fixture(scope="module")
def hostile_batch(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    subs, out = root / "submissions", root / "out"
    solution = (SOLUTIONS / f"{EXERCISE}.py").read_text()
    listener = Listener()
    marker = f"{4000 + os.getpid() % 1000}.{time.time_ns() % 1000}"
    fill = dict(out=out, victim=subs / "victim", solutions=SOLUTIONS / f"{EXERCISE}.py",
                port=listener.port, marker=marker)
    (subs / "victim").mkdir(parents=True)
    (subs / "victim" / f"{EXERCISE}.py").write_text(solution)
    for threat in THREATS:
        folder = subs / threat.name
        folder.mkdir()
        if threat.files:
            for name, data in threat.files.items():
                (folder / name).write_bytes(data)
            continue
        code = solution + "\n\n" + threat.replace.format(**fill) + "\n\n" + \
            threat.at_import.format(**fill)
        (folder / f"{EXERCISE}.py").write_text(code)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "grader.cli", "grade", str(subs),
                           "--out", str(out)],
                          capture_output=True, text=True, timeout=900)
    elapsed = time.monotonic() - started
    time.sleep(0.5)
    leftovers = processes_with(marker)
    listener.close()
    yield proc, out, listener, leftovers, elapsed
    for pid in processes_with(marker):  # never leave the machine dirty, whatever happened
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def test_the_whole_batch_is_graded(hostile_batch):
    proc, out, *_ = hostile_batch
    assert proc.returncode == 0, proc.stderr[-3000:]
    for threat in THREATS:
        assert (out / threat.name / "results.json").exists(), threat.name
        assert (out / threat.name / "report.html").exists(), threat.name


@pytest.mark.parametrize("threat", THREATS, ids=[t.name for t in THREATS])
def test_each_threat_gets_exactly_the_expected_verdicts(hostile_batch, threat):
    _, out, *_ = hostile_batch
    result = read_json(out / threat.name / "results.json")
    assert result.checks
    for check in result.checks:
        if threat.all_checks is not None:
            expected = threat.all_checks
        elif threat.target and threat.target in check.targets:
            expected = threat.status
        else:
            expected = "passed"
        assert check.status == expected, (check.id, check.status, check.message)
        if expected != "passed" and threat.words:
            assert threat.words in check.message, (check.id, check.message)


def test_nothing_reached_the_network(hostile_batch):
    listener = hostile_batch[2]
    assert listener.connections == 0


def test_nothing_was_left_running(hostile_batch):
    leftovers = hostile_batch[3]
    assert leftovers == []


def test_no_result_was_overwritten(hostile_batch):
    _, out, *_ = hostile_batch
    victim = read_json(out / "victim" / "results.json")
    assert victim.student == "victim" and victim.score == victim.max_score > 0
    faker = read_json(out / "writes_fake_results" / "results.json")
    assert faker.student == "writes_fake_results" and faker.score == faker.max_score
    rows = {r["student"]: r for r in csv.DictReader((out / "grades.csv").open())}
    assert float(rows["victim"]["score"]) == victim.score
    assert "victim" in (out / "index.html").read_text()


def test_reports_stay_bounded(hostile_batch):
    _, out, *_ = hostile_batch
    for folder in out.iterdir():
        if folder.is_dir():
            for name in ("report.html", "results.json"):
                assert (folder / name).stat().st_size < REPORT_LIMIT, (folder.name, name)
    printed = read_json(out / "prints_300_mb" / "results.json")
    assert "omitted" in printed.exercises[0].output


def test_the_result_records_the_isolation_level(hostile_batch):
    _, out, *_ = hostile_batch
    result = read_json(out / "victim" / "results.json")
    assert result.isolation in ("full", "reduced", "none")
    html = (out / "victim" / "report.html").read_text()
    assert f"isolation: {result.isolation}" in html
