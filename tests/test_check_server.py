"""The warm local check (grader.checkserver): the first `torchgrade check` leaves a server, later
ones are answered by it with what a check in their own process would print; it answers only its
user and only the installation it was started from, and goes away by itself.

Each test runs the console script as a student does, with the servers' folder in tmp_path, and
stops every server it started."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import SOLUTIONS
from grader.checkserver import address, client
from grader.course.location import default_root

TORCHGRADE = str(Path(sys.executable).with_name("torchgrade"))
SOLUTION = SOLUTIONS / "strides_broadcasting.py"
COURSE = default_root()


@pytest.fixture
def servers(monkeypatch):
    """The servers' folder of this test (mode 0700, in /tmp: another user can walk to it once
    it is opened); every server started in it is stopped."""
    from grader.worker import sandbox

    if not sandbox.bwrap_works():
        pytest.skip("a check server needs the sandbox's private view (bubblewrap)")
    folder = Path(tempfile.mkdtemp(prefix="torchgrade-test-servers-", dir="/tmp"))
    monkeypatch.setenv(address.SERVER_ENV, "1")
    monkeypatch.setenv(address.DIR_ENV, str(folder))
    monkeypatch.setenv(address.IDLE_ENV, "300")
    yield folder
    for lock in folder.glob("*.lock"):
        pid = _pid(lock)
        if pid:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    shutil.rmtree(folder, ignore_errors=True)


def _pid(lock: Path) -> int | None:
    text = lock.read_text().strip()
    return int(text) if text.isdigit() else None


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def check(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([TORCHGRADE, "check", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=env)


def wait_for_server(folder: Path, timeout: float = 120.0) -> int:
    """The pid of the server in `folder` once it answers requests (its warm-up done)."""
    deadline = time.monotonic() + timeout
    lock = folder / (address.server_name(COURSE) + ".lock")
    while time.monotonic() < deadline:
        try:  # a check of nothing: a usage error, answered once its warm-up is done
            warm(["check", str(folder / "not-a-submission.py")], folder)
        except client.NoServer:
            time.sleep(0.2)
            continue
        return _pid(lock)  # type: ignore[return-value]
    raise AssertionError(f"no server in {folder}: {list(folder.iterdir())}")


def warm(argv: list[str], cwd: Path) -> tuple[int, str, str]:
    """`torchgrade check` through the server, in this process: (code, stdout, stderr);
    NoServer when none answered."""
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = client.check_warm(argv, course_root=COURSE, color=False)
    finally:
        os.chdir(here)
    return code, out.getvalue(), err.getvalue()


def _descendants(pid: int) -> set[int]:
    """Every process below `pid` (from /proc: the sandbox's pid namespaces hide nothing here)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                parents[int(entry.name)] = int(
                    (entry / "stat").read_text().rsplit(") ", 1)[1].split()[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def until_a_worker_runs(server: int, before: set[int], timeout: float = 120.0) -> None:
    """Return once the server has a process it did not have in `before` (the sandbox's worker
    for the check just sent): the check is under way, whatever the machine's load."""
    deadline = time.monotonic() + timeout
    while not (_descendants(server) - before):
        assert time.monotonic() < deadline, "the server never started a worker"
        time.sleep(0.05)


def test_the_first_check_leaves_a_server_and_the_next_is_answered_by_it_alike(servers, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(SOLUTION, work / "strides_broadcasting.py")
    with pytest.raises(client.NoServer):  # nothing is up before the first check
        warm(["check", "strides_broadcasting.py"], work)
    cold = check("strides_broadcasting.py", cwd=work)
    assert cold.returncode == 0, cold.stdout + cold.stderr
    assert cold.stderr.count("a check server stays up") == 1  # said once, on stderr
    pid = wait_for_server(servers)
    assert _alive(pid)

    # Relative paths and the default --out are the student's terminal's, not the server's.
    code, out, err = warm(["check", "strides_broadcasting.py"], work)
    assert (code, out) == (0, cold.stdout), err
    assert "Report: torchgrade-check/strides_broadcasting/report.html" in out
    assert (work / "torchgrade-check" / "strides_broadcasting" / "report.html").is_file()

    # The student's code is read anew every time: a fix or a new bug shows at once.
    text = SOLUTION.read_text()
    broken = text.replace("def c_strides(", "def c_strides_gone(")
    assert broken != text
    (work / "strides_broadcasting.py").write_text(broken)
    code, out, _ = warm(["check", "strides_broadcasting.py", "--only", "c_strides"], work)
    assert code == 1 and ("FAILED" in out or "ERROR" in out)
    cold = check("strides_broadcasting.py", "--only", "c_strides", "--no-server", cwd=work)
    assert (code, out) == (cold.returncode, cold.stdout)

    # The console script goes through the server too (and leaves no second one).
    again = check("strides_broadcasting.py", "--only", "c_strides", cwd=work)
    assert (again.returncode, again.stdout) == (code, out)
    assert _pid(servers / (address.server_name(COURSE) + ".lock")) == pid
    # A usage error is the command's own one line, exit 2.
    code, out, err = warm(["check", "missing.py"], work)
    assert code == 2 and err == "torchgrade: error: missing.py: no such file or folder\n"


def test_a_check_made_while_the_server_warms_up_does_not_wait_for_it(servers, tmp_path):
    """A server refuses checks until its warm-up is done: a check made a few seconds after the
    first runs in its own process at once (waiting for the warm-up took longer than a cold
    check), and the server is there for the checks after."""
    work = tmp_path / "work"
    work.mkdir()
    client.leave_server(COURSE)
    sock = servers / (address.server_name(COURSE) + ".sock")
    deadline = time.monotonic() + 60
    while not sock.exists():  # bound: the server is warming up (importing torch, its sandbox)
        assert time.monotonic() < deadline, "the server never bound its socket"
        time.sleep(0.01)
    started = time.monotonic()
    with pytest.raises(client.NoServer, match="no server listens"):
        warm(["check", str(SOLUTION), "--only", "c_strides"], work)
    assert time.monotonic() - started < 1.0  # not after its warm-up (seconds)
    pid = wait_for_server(servers)
    code, out, _ = warm(["check", str(SOLUTION), "--only", "c_strides"], work)
    assert code == 0 and "PASSED" in out
    assert _pid(servers / (address.server_name(COURSE) + ".lock")) == pid


def test_a_cold_check_whose_workers_could_see_its_folder_leaves_no_server(servers, tmp_path):
    """A server refuses to serve where the workers' view is not private; a cold check whose
    self-test found its folder visible to them (inside the Python installation, or a student
    release's own source folder) leaves none, instead of announcing one at every check."""
    out = tmp_path / "out"
    cold = check(str(SOLUTION), "--only", "c_strides", "--out", str(out),
                 cwd=Path(sys.prefix) / "lib")
    assert cold.returncode == 0, cold.stdout + cold.stderr
    assert "check server stays up" not in cold.stderr
    assert not list(servers.glob("*.lock"))  # none was even started


def test_a_server_answers_only_its_own_user(servers, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to connect as another user")
    work = tmp_path / "work"
    work.mkdir()
    check(str(SOLUTION), "--only", "c_strides", cwd=work)
    pid = wait_for_server(servers)
    sock = servers / (address.server_name(COURSE) + ".sock")
    # Open the folder and the socket to everyone: the server itself must still refuse.
    os.chmod(servers, 0o777)
    os.chmod(sock, 0o777)
    # The key is no secret (stamps of world-readable files): the right one, and a real check.
    request = json.dumps({"key": address.version_key(COURSE), "cwd": str(work), "color": False,
                          "argv": ["check", str(SOLUTION), "--only", "c_strides"]}).encode()
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # as nobody: ask for a check, report the server's reply
        try:
            os.close(reader)
            os.setgid(65534)
            os.setuid(65534)
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.connect(str(sock))
            conn.sendall(request)
            conn.settimeout(30)
            os.write(writer, conn.recv(4096))
        except BaseException as exc:  # noqa: BLE001 - told to the test
            os.write(writer, repr(exc).encode())
        finally:
            os._exit(0)
    os.close(writer)
    os.waitpid(child, 0)
    with os.fdopen(reader, "rb") as source:
        reply = source.read()
    assert b'"refused"' in reply and b"user" in reply, reply
    assert _alive(pid)  # and it goes on serving its user
    os.chmod(servers, 0o700)
    code, _, _ = warm(["check", str(SOLUTION), "--only", "c_strides"], work)
    assert code == 0


def test_a_folder_others_can_open_is_never_used(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv(address.DIR_ENV, str(shared))
    assert address.runtime_dir() is None
    os.chmod(shared, 0o700)
    assert address.runtime_dir() == shared
    if os.geteuid() == 0:
        os.chown(shared, 65534, 65534)  # someone else's, even private
        assert address.runtime_dir() is None


def test_a_server_of_another_installation_steps_aside(servers, tmp_path, monkeypatch):
    """Anything the answer depends on changed (here a TORCHGRADE_ setting, as a reinstall of
    torchgrade or an edit of the course's checks would): the old server exits rather than answer,
    the check runs in its own process, and a new server is left."""
    work = tmp_path / "work"
    work.mkdir()
    check(str(SOLUTION), "--only", "c_strides", cwd=work)
    old = wait_for_server(servers)
    monkeypatch.setenv("TORCHGRADE_SOME_SETTING", "changed")
    with pytest.raises(client.NoServer):
        warm(["check", str(SOLUTION), "--only", "c_strides"], work)
    deadline = time.monotonic() + 30
    while _alive(old) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(old)
    env = {**os.environ}
    cold = check(str(SOLUTION), "--only", "c_strides", cwd=work, env=env)
    assert cold.returncode == 0, cold.stderr
    new = wait_for_server(servers)
    assert new != old
    assert warm(["check", str(SOLUTION), "--only", "c_strides"], work)[1] == cold.stdout


def test_course_files_changed_make_a_server_stale(tmp_path):
    """The key stamps the course's checks, stubs and solutions (an instructor editing a check
    gets their edit checked, not the server's imported copy)."""
    course = tmp_path / "course"
    shutil.copytree(COURSE, course, ignore=shutil.ignore_patterns("__pycache__", "samples",
                                                                  "mutants"))
    before = address.version_key(course)
    assert address.version_key(course) == before
    check_file = course / "checks" / "test_strides_broadcasting.py"
    check_file.write_text(check_file.read_text() + "\n# edited\n")
    assert address.version_key(course) != before
    edited = address.version_key(course)
    (course / "solutions" / "strides_broadcasting.py").write_text("# replaced\n")
    assert address.version_key(course) != edited


def test_a_server_goes_away_when_idle_or_killed(servers, tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv(address.IDLE_ENV, "3")
    check(str(SOLUTION), "--only", "c_strides", cwd=work)
    pid = wait_for_server(servers)
    sock = servers / (address.server_name(COURSE) + ".sock")
    deadline = time.monotonic() + 60
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(pid), "an idle server must exit by itself"
    assert not sock.exists()

    # Killed outright, it leaves its socket: the next check runs in its own process, alike,
    # and leaves a working server again.
    monkeypatch.setenv(address.IDLE_ENV, "300")
    check(str(SOLUTION), "--only", "c_strides", cwd=work)
    pid = wait_for_server(servers)
    os.kill(pid, signal.SIGKILL)
    while _alive(pid):
        time.sleep(0.05)
    assert sock.exists()
    with pytest.raises(client.NoServer):
        warm(["check", str(SOLUTION), "--only", "c_strides"], work)
    cold = check(str(SOLUTION), "--only", "c_strides", cwd=work)
    assert cold.returncode == 0, cold.stderr
    assert wait_for_server(servers) != pid
    assert warm(["check", str(SOLUTION), "--only", "c_strides"], work)[1] == cold.stdout


def test_no_server_is_used_or_left_when_turned_off(servers, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    done = check(str(SOLUTION), "--only", "c_strides", "--no-server", cwd=work)
    off = check(str(SOLUTION), "--only", "c_strides", cwd=work,
                env={**os.environ, address.SERVER_ENV: "0"})
    assert done.returncode == off.returncode == 0
    assert "check server" not in done.stderr + off.stderr
    time.sleep(1.0)
    assert not list(servers.iterdir())


def test_a_signal_never_cuts_a_check_short_and_folders_workers_see_are_checked_cold(
        servers, tmp_path):
    """SIGINT to the server (not the student's Ctrl-C: that reaches the client) changes
    nothing; SIGTERM during a check lets it finish with the right answer, then the server goes.
    A check asked from a folder the workers' view holds (inside the Python installation) is sent
    back to run in its own process, whose self-test names it; the client's umask is the one its
    report folders and files get."""
    work = tmp_path / "work"
    work.mkdir()
    slow = work / "strides_broadcasting.py"
    slow.write_text(SOLUTION.read_text() + "\nimport time\ntime.sleep(1.5)\n")
    cold = check(str(slow), "--only", "c_strides", "--no-server", cwd=work)
    assert cold.returncode == 0, cold.stdout + cold.stderr
    check(str(SOLUTION), "--only", "c_strides", cwd=work)
    pid = wait_for_server(servers)
    for signum in (signal.SIGINT, signal.SIGTERM):
        before = _descendants(pid)
        running = subprocess.Popen([TORCHGRADE, "check", str(slow), "--only", "c_strides"],
                                   cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
        until_a_worker_runs(pid, before)  # loading the module, which sleeps 1.5 s
        os.kill(pid, signum)
        out, err = running.communicate(timeout=120)
        assert (running.returncode, out) == (0, cold.stdout), err
        assert "check server stays up" not in err  # answered by the server, not cold
        if signum == signal.SIGINT:
            assert _alive(pid)
    deadline = time.monotonic() + 30
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), "SIGTERM ends the server once its check is answered"

    check(str(SOLUTION), "--only", "c_strides", cwd=work)
    wait_for_server(servers)
    with pytest.raises(client.NoServer) as sent_back:
        warm(["check", str(SOLUTION), "--only", "c_strides"], Path(sys.prefix) / "lib")
    assert not sent_back.value.leave  # the server is fine: no second one is started
    mask = os.umask(0o077)
    try:
        code, _, _ = warm(["check", str(SOLUTION), "--only", "c_strides", "--out", "private"],
                          work)
    finally:
        os.umask(mask)
    assert code == 0 and (work / "private").stat().st_mode & 0o777 == 0o700
    written = [p for p in (work / "private").rglob("*") if p.is_file()]
    assert written and {p.stat().st_mode & 0o777 for p in written} == {0o600}


@pytest.mark.fast
def test_server_settings_out_of_range_fall_back_to_their_defaults(monkeypatch, tmp_path):
    for value in ("inf", "1e300", "-5", "0", "nan", "soon"):
        monkeypatch.setenv(address.IDLE_ENV, value)
        assert address.idle_seconds() == address.IDLE_SECONDS, value
    monkeypatch.setenv(address.IDLE_ENV, "20")
    assert address.describe_idle() == "20 idle seconds"
    monkeypatch.setenv(address.IDLE_ENV, "900")
    assert address.describe_idle() == "15 idle minutes"
    for off in ("0", "OFF", "False", " no "):
        monkeypatch.setenv(address.SERVER_ENV, off)
        assert not address.enabled(), off
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(address.DIR_ENV, "servers")  # relative: the same folder from anywhere
    assert address.runtime_dir() == tmp_path / "servers"


def test_a_check_whose_student_pressed_ctrl_c_stops_and_writes_nothing(servers, tmp_path):
    """Ctrl-C in the client's terminal ends the client (exit 130); the server sees its client
    gone, interrupts that check as Ctrl-C interrupts a check in its own process (no report),
    and exits; the next check runs in its own process, correctly, and leaves a new server."""
    work = tmp_path / "work"
    work.mkdir()
    slow = work / "strides_broadcasting.py"
    slow.write_text(SOLUTION.read_text() + "\nimport time\ntime.sleep(3)\n")
    check(str(SOLUTION), "--only", "c_strides", cwd=work)
    pid = wait_for_server(servers)
    before = _descendants(pid)
    # SIGINT as a terminal leaves it: a test run started in the background (`nohup ... &`, as
    # CI may) ignores SIGINT, and an ignored signal stays ignored in every process it starts.
    running = subprocess.Popen([TORCHGRADE, "check", str(slow), "--only", "c_strides",
                                "--out", "interrupted"], cwd=work, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    until_a_worker_runs(pid, before)  # loading the module, which sleeps 3 s
    running.send_signal(signal.SIGINT)
    _, err = running.communicate(timeout=60)
    assert running.returncode == 130 and "interrupted; nothing was written" in err, err
    deadline = time.monotonic() + 30
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), "the server of an interrupted check goes"
    time.sleep(3)  # what the interrupted check would have written by now, had it gone on
    assert not (work / "interrupted").exists()
    done = check(str(slow), "--only", "c_strides", cwd=work)
    assert done.returncode == 0 and "check server stays up" in done.stderr, done.stderr
    assert wait_for_server(servers) != pid
