"""What a worker can see and how much it can hold (issue 15, classes 4 and 6).

The view: `torchgrade grade` started from a course folder outside /tmp, with PYTHONPATH set to a
folder holding a module named like an exercise; submissions that copy a classmate's file, search
sys.path and the disk for a solution, or look for SUBMISSIONS and OUT must find nothing.

Memory: RLIMIT_AS misses memfds, tmpfs files and shared mappings; the worker's cgroup counts
them. Every attack is bounded: a 1 GiB limit and 1.5 GiB tried, 200 processes at most.
"""

from __future__ import annotations

import errno
import os
import signal
import shutil
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import SOLUTIONS
from grader.outputs.writing import read_json
from grader.models import ModuleSource, SourceChunk
from grader.checking.student import StudentError, StudentModule
from grader.worker import cgroups, sandbox, syscalls
from grader.worker.client import Zygote
from grader.worker.limits import GiB, WorkerLimits

EXERCISE = "strides_broadcasting"
MEMORY = WorkerLimits(call_timeout=30.0, load_timeout=10.0, memory=GiB)
TRIED_MIB = 1536  # what each memory attack tries to hold, against a 1 GiB limit

needs_root = pytest.mark.skipif(not sandbox.is_root(), reason="cgroups and uids need root")
# What this machine offers, asked of the kernel, not of the grader under test.
MACHINE_CGROUPS = cgroups.available() if sandbox.is_root() else set()
needs_memory_cgroup = pytest.mark.skipif("memory" not in MACHINE_CGROUPS,
                                         reason="no writable memory cgroup on this machine")


@contextmanager
def module_of(zygote, code: str, limits: WorkerLimits = MEMORY):
    chunks = [SourceChunk(code=code, filename="m.py", label="m.py")]
    source = ModuleSource(exercise="m", path="m.py", kind="py", chunks=chunks)
    module = StudentModule("m", source, spawn=zygote.spawn, limits=limits)
    try:
        yield module
    finally:
        module.close()


def processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found


# --------------------------------------------------------------------------- the view

SECRET_WORDS = "classmate-secret-7f3a"


def _copycat(course: Path) -> str:
    """Imports a classmate's file by its path: full marks if the class folder is visible."""
    return f"""
import sys
sys.path.insert(0, {str(course / "class" / "honest")!r})
try:
    exec(open({str(course / "class" / "honest" / f"{EXERCISE}.py")!r}).read())
except OSError:
    pass
"""


def _path_search(course: Path) -> str:
    """Looks for a module named like the exercise on sys.path, PYTHONPATH, the grader's
    current directory and this worker's: nothing but itself may be found."""
    return f"""
import os, sys
for folder in list(sys.path) + [{str(course / "lib")!r}, {str(course)!r}, os.getcwd()]:
    try:
        exec(open(os.path.join(folder or ".", "{EXERCISE}.py")).read())
        break
    except OSError:
        pass
"""


def _finder() -> str:
    """Discovers bound folders from /proc/self/mountinfo (then walks the rest of the view),
    looking for a file named like the exercise that holds the classmate's words."""
    return f"""
import os, time
SYSTEM = ("/proc", "/sys", "/dev", "/usr", "/etc", "/lib", "/bin", "/sbin")
import sys
PYTHON = (sys.prefix, sys.base_prefix)
points = [line.split()[4] for line in open("/proc/self/mountinfo")]
points = [p for p in points if p != "/" and not p.startswith(SYSTEM + PYTHON)]
stop = time.monotonic() + 3
def search(point):
    for top, dirs, files in os.walk(point):
        dirs[:] = [d for d in dirs if not os.path.join(top, d).startswith(SYSTEM)
                   and d not in ("torch", "site-packages", "dist-packages")]
        if time.monotonic() > stop:
            return None
        if "{EXERCISE}.py" in files:
            try:
                text = open(os.path.join(top, "{EXERCISE}.py")).read()
            except OSError:
                continue
            if {SECRET_WORDS!r} in text and "def " + "c_strides" in text:  # not itself
                return text
for point in points + ["/"]:
    found = search(point)
    if found:
        exec(found)
        break
"""


def _prober(course: Path) -> str:
    """An honest solution that refuses to load if it sees SUBMISSIONS, OUT, the course folder,
    PYTHONPATH's folder, the grader's checks or solutions: full marks only if it saw nothing."""
    import grader

    package = Path(grader.__file__).resolve().parent
    paths = [course, course / "class", course / "graded", course / "lib",
             course / "class" / "honest" / f"{EXERCISE}.py",
             package.parent / "checks", SOLUTIONS,
             package.parent / "tests"]
    return (SOLUTIONS / f"{EXERCISE}.py").read_text() + f"""
import os as _os
for _p in {[str(p) for p in paths]!r}:
    if _os.path.exists(_p):
        raise RuntimeError("saw " + _p)
    try:
        open(_p)
    except OSError:
        pass
    else:
        raise RuntimeError("opened " + _p)
"""


@pytest.fixture(scope="module")
def course():
    """A course folder outside /tmp (in root's home), removed afterwards."""
    home = Path(os.environ.get("HOME") or "/root")
    if str(home).startswith("/tmp") or not os.access(home, os.W_OK):
        pytest.skip("needs a writable home folder outside /tmp")
    folder = home / f"tg-course-{os.getpid()}"
    folder.mkdir()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def class_run(course):
    """`python -m grader grade class --out graded` started in the course folder, PYTHONPATH
    set to a folder with a module named like the exercise (the reference solution)."""
    solution = (SOLUTIONS / f"{EXERCISE}.py").read_text() + f"\n# {SECRET_WORDS}\n"
    (course / "lib").mkdir()
    (course / "lib" / f"{EXERCISE}.py").write_text(solution)
    submissions = {"honest": solution, "copycat": _copycat(course),
                   "path_search": _path_search(course), "finder": _finder(),
                   "prober": _prober(course), "empty": ""}
    for student, code in submissions.items():
        (course / "class" / student).mkdir(parents=True)
        (course / "class" / student / f"{EXERCISE}.py").write_text(code)
    env = dict(os.environ, PYTHONPATH=str(course / "lib"))
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", "class", "--out", "graded",
                           "-j", "1"], cwd=course, env=env, capture_output=True, text=True,
                          timeout=900)
    return proc, course / "graded"


def test_the_class_run_finishes(class_run):
    proc, graded = class_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (graded / "index.html").exists() and (graded / "grades.csv").exists()


def test_the_run_is_fully_isolated_and_the_honest_student_gets_full_marks(class_run):
    proc, graded = class_run
    honest = read_json(graded / "honest" / "results.json")
    assert honest.score == honest.max_score > 0
    if sandbox.is_root() and sandbox.bwrap_works():
        assert honest.isolation == "full", proc.stderr[-2000:]


@pytest.mark.parametrize("student", ["copycat", "path_search", "finder", "empty"])
def test_a_submission_cannot_take_a_classmates_or_pythonpaths_code(class_run, student):
    _, graded = class_run
    result = read_json(graded / student / "results.json")
    if result.isolation != "full":
        pytest.skip(f"isolation is {result.isolation} here")
    assert result.checks and result.score == 0, [(c.id, c.status) for c in result.checks]


def test_a_submission_sees_neither_submissions_nor_out_nor_the_checks(class_run):
    _, graded = class_run
    result = read_json(graded / "prober" / "results.json")
    if result.isolation != "full":
        pytest.skip(f"isolation is {result.isolation} here")
    failed = [(c.id, c.message) for c in result.checks if c.status != "passed"]
    assert not failed and result.score == result.max_score, failed[:2]


ZYGOTE_FACTS = """
import json, sys
from grader.worker.client import Zygote
with Zygote(hidden=sys.argv[1:]) as z:
    print(json.dumps({"isolation": z.isolation, "missing": z.missing, "leaks": z.leaks,
                      "hidden": z.hidden, "memory": z.memory}))
"""


def _zygote_facts(cwd: Path, *hidden: str, pythonpath: str = "") -> dict:
    import json

    env = dict(os.environ, PYTHONPATH=pythonpath) if pythonpath else dict(os.environ)
    proc = subprocess.run([sys.executable, "-c", ZYGOTE_FACTS, *hidden], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@needs_memory_cgroup
def test_the_self_test_proves_the_course_folder_absent(course):
    """Started from the course folder with PYTHONPATH: the self-test checks the folder, the
    path and the checks, finds none of them in a worker, and the level is full."""
    if not sandbox.bwrap_works():
        pytest.skip("bubblewrap does not work here")
    (course / "lib").mkdir(exist_ok=True)
    facts = _zygote_facts(course, str(course / "class"), pythonpath=str(course / "lib"))
    assert {str(course), str(course / "lib"), str(course / "class")} <= set(facts["hidden"])
    assert facts["leaks"] == [] and facts["isolation"] == "full", facts
    assert facts["memory"].startswith("memory: cgroup v"), facts


@needs_root
def test_a_failed_proof_drops_the_level_below_full_and_says_why(course):
    """A path the grader must hide that lies inside the Python installation (here: the venv's
    site-packages, standing for an OUT written there) is visible: not "full", and named."""
    if not sandbox.bwrap_works():
        pytest.skip("bubblewrap does not work here")
    import site

    inside = site.getsitepackages()[0]
    facts = _zygote_facts(course, inside)
    assert facts["isolation"] == "reduced", facts
    assert inside in facts["leaks"] and inside in facts["missing"], facts


@needs_root
def test_a_course_file_symlinked_into_what_workers_see_is_not_called_full(tmp_path, monkeypatch):
    """A course whose checks folder is a symlink to a folder under /usr (which every worker is
    shown): the link's target is among the paths the self-test proves absent, so the level is
    not "full" and the target is named, instead of hidden checks readable at "full"."""
    if not sandbox.bwrap_works():
        pytest.skip("bubblewrap does not work here")
    target = Path(f"/usr/share/torchgrade-test-{os.getpid()}")
    try:
        (target / "checks").mkdir(parents=True)
        (target / "checks" / "test_ex_hidden.py").write_text("SECRET = 1\n")
        course = tmp_path / "course"
        course.mkdir()
        (course / "checks").symlink_to(target / "checks")
        monkeypatch.setenv("TORCHGRADE_COURSE", str(course))
        assert str(target / "checks") in sandbox.must_not_see()
        facts = _zygote_facts(tmp_path)
        assert facts["isolation"] == "reduced", facts
        assert str(target / "checks") in facts["leaks"], facts
    finally:
        shutil.rmtree(target, ignore_errors=True)


# --------------------------------------------------------------------------- memory

MEMORY_ATTACKS = {
    "memfd": f"""
import os
def attack():
    block = b"\\1" * (1 << 20)
    fds = []
    for _ in range({TRIED_MIB} // 32):  # many small memfds: RLIMIT_FSIZE caps each one
        fd = os.memfd_create("hoard")
        for _ in range(32):
            os.write(fd, block)
        fds.append(fd)
    return len(fds) * 32
""",
    "shared_mapping": f"""
import mmap
def attack():
    m = mmap.mmap(-1, {TRIED_MIB} << 20, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
    for i in range(0, {TRIED_MIB} << 20, 4096):
        m[i] = 1
    return {TRIED_MIB}
""",
    "every_tmpfs_then_memfd": f"""
import os, tempfile
def attack():
    block = b"\\1" * (1 << 20)
    held = 0
    for folder in ("/tmp", "/dev/shm", os.getcwd(), tempfile.gettempdir()):
        for i in range(6):
            try:
                with open(os.path.join(folder, f"hoard{{i}}"), "wb") as f:
                    for _ in range(32):
                        f.write(block)
                        held += 1
            except OSError:
                break
    fds = []
    while held < {TRIED_MIB}:
        fd = os.memfd_create("hoard")
        for _ in range(32):
            os.write(fd, block)
        fds.append(fd)
        held += 32
    return held
""",
}


@needs_memory_cgroup
@pytest.mark.parametrize("attack", list(MEMORY_ATTACKS))
def test_memory_outside_the_address_space_is_counted(zygote, attack):
    """1.5 GiB held in memfds, a shared mapping, or tmpfs files plus memfds, against a 1 GiB
    limit: the worker is killed and the call reported as crashed for memory."""
    with module_of(zygote, MEMORY_ATTACKS[attack]) as sub:
        with pytest.raises(StudentError) as info:
            sub.call("attack")
    assert info.value.status == "crashed" and "memory limit of 1 GiB" in str(info.value)


@needs_memory_cgroup
def test_an_honest_worker_runs_under_the_memory_limit(zygote):
    """Under 1 GiB, 120 MB in a memfd and a tmpfs file are fine."""
    code = ("import os\n"
            "def hold():\n"
            "    fd = os.memfd_create('ok')\n"
            "    block = b'\\1' * (1 << 20)\n"
            "    for _ in range(60):\n"
            "        os.write(fd, block)\n"
            "    with open('/tmp/ok', 'wb') as f:\n"
            "        f.write(block * 60)\n"
            "    return os.fstat(fd).st_size + os.path.getsize('/tmp/ok')\n")
    with module_of(zygote, code) as sub:
        assert sub.call("hold") == 120 << 20


def _fork_bomb(marker: str) -> str:
    return f"""
import os
def bomb():
    started = 0
    for _ in range(200):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            try:
                os.setsid()  # out of the worker's process group
                os.execvp("sleep", ["sleep", "{marker}"])
            finally:
                os._exit(0)
        started += 1
    return started
"""


@needs_root
@pytest.mark.parametrize("isolate", [True, False], ids=["contained", "bare"])
def test_a_fork_bomb_is_bounded_and_cleaned_up(isolate, zygote):
    """200 forks tried (each escaping the process group): at most `processes` succeed, even
    for a worker running as root (RLIMIT_NPROC does not hold for root), and none outlives it."""
    marker = f"{30 + os.getpid() % 50}.{time.time_ns() % 10**6}"
    limits = WorkerLimits(call_timeout=20.0, processes=32)

    if "pids" not in MACHINE_CGROUPS and not isolate:
        pytest.skip("no pids cgroup here: nothing bounds a root worker's processes")

    def run(z):
        with module_of(z, _fork_bomb(marker), limits) as sub:
            started = sub.call("bomb")
        return started

    try:
        if isolate:
            started = run(zygote)
        else:
            with Zygote(isolate=False) as bare:
                started = run(bare)
        assert started <= limits.processes + cgroups.PIDS_HEADROOM
        deadline = time.monotonic() + 10
        while processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert processes_with(marker) == []
    finally:
        for pid in processes_with(marker):
            try:
                os.kill(pid, 9)
            except OSError:
                pass


@needs_memory_cgroup
def test_no_cgroup_folder_is_left_behind():
    """A zygote removes its workers' folders as it reaps them and the grader its own at close,
    also for a worker killed for memory."""
    with Zygote() as z:
        folders = z.cgroup.dirs
        with module_of(z, MEMORY_ATTACKS["memfd"]) as sub:
            with pytest.raises(StudentError):
                sub.call("attack")
        deadline = time.monotonic() + 5
        while [n for f in folders for n in os.listdir(f) if n.startswith("w")]:
            assert time.monotonic() < deadline, [os.listdir(f) for f in folders]
            time.sleep(0.1)
    assert not any(os.path.exists(f) for f in folders)


@needs_memory_cgroup
@pytest.mark.parametrize("threads", [1, 2])
def test_a_joining_process_moves_in_with_every_thread(threads):
    """`WorkerGroup.join` in a fresh fork (one thread: cgroup v1 moves just it, through `tasks`)
    and in a process running a second thread (the whole process moves): every thread of the
    process, and a child it forks after, is in every folder of the group."""
    group_root = cgroups.ZygoteGroup.create()
    assert group_root is not None
    group = cgroups.WorkerGroup.create(group_root.hierarchies, "jointest", memory=GiB,
                                       processes=8)
    try:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                if threads == 2:
                    threading.Thread(target=time.sleep, args=(5,), daemon=True).start()
                group.join()
                child = os.fork()
                if child == 0:
                    time.sleep(5)
                    os._exit(0)
                tasks = [f"/proc/{os.getpid()}/task/{t}/cgroup"
                         for t in os.listdir(f"/proc/{os.getpid()}/task")]
                tasks.append(f"/proc/{child}/cgroup")
                os.write(w, "\n---\n".join(open(t).read() for t in tasks).encode())
                os.kill(child, 9)
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        with os.fdopen(r) as f:
            reports = f.read().split("\n---\n")
        assert os.waitpid(pid, 0)[1] == 0
        assert len(reports) == threads + 1
        for _, folder in group.folders:
            relative = folder.split("/sys/fs/cgroup/", 1)[-1].split("/", 1)[-1]
            for report in reports:
                assert any(line.endswith("/" + relative) for line in report.splitlines()), \
                    (folder, report)
    finally:
        group.remove()
        group_root.remove()


# --------------------------------------------------------------------------- kernel interfaces

KEYRING_WRITER = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def leave(name, note):
    data = note.encode()
    # add_key("user", name, data, len, KEY_SPEC_USER_KEYRING)
    key = libc.syscall({add_key}, b"user", name.encode(), data, ctypes.c_size_t(len(data)),
                       ctypes.c_long(-4))
    return [key, ctypes.get_errno()]
def find(name):
    try:
        with open("/proc/keys") as f:
            return [line for line in f if name in line]
    except OSError:
        return []
def new_user_namespace():
    return [libc.unshare(0x10000000), ctypes.get_errno()]  # CLONE_NEWUSER
"""


@pytest.mark.skipif(not syscalls.available(), reason="libseccomp is not installed")
@pytest.mark.skipif(os.uname().machine not in ("x86_64", "aarch64"), reason="syscall numbers")
def test_no_worker_reaches_the_kernel_keyrings_or_makes_a_user_namespace(zygote):
    """A key one submission leaves in its uid's keyring (not namespaced; uids repeat) was read
    by a later submission: workers may not use the keyrings at all, nor make user namespaces."""
    code = KEYRING_WRITER.format(add_key=248 if os.uname().machine == "x86_64" else 217)
    name = f"torchgrade-note-{os.getpid()}-{time.monotonic_ns()}"
    with module_of(zygote, code) as writer:
        key, err = writer.call("leave", name, "the answer is 42")
        assert (key, err) == (-1, errno.EPERM)
        assert writer.call("new_user_namespace") == [-1, errno.EPERM]
    with module_of(zygote, code) as reader:
        assert reader.call("find", name) == []


CPU_HOG = """
import os, time

def hog(seconds, n):
    kids = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            os.setsid()  # a session of its own: an autogroup of its own, an equal share each
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                pass
            os._exit(0)
        kids.append(pid)
    for pid in kids:
        os.waitpid(pid, 0)
    t = os.times()
    return t.children_user + t.children_system

def background(seconds, n):
    for _ in range(n):
        if os.fork() == 0:
            os.setsid()
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                pass
            os._exit(0)
    return n
"""


@needs_root
@pytest.mark.skipif("cpu" not in MACHINE_CGROUPS, reason="no cpu cgroup on this machine")
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: nothing to take")
def test_a_worker_gets_one_core_however_many_processes_it_starts(zygote):
    """Busy processes in sessions of their own took most of the machine from the other grading
    processes' workers (an attack slowed them 25-50x): a worker's cgroup has one core. Three
    hogs for 1.5 s would use 3 CPU-seconds on two free cores; capped, 1.5."""
    assert zygote.cgroups.get("cpu")
    with module_of(zygote, CPU_HOG) as sub:
        used = sub.call("hog", 1.5, 3)
    assert 0.5 < used < 2.1


@needs_root
@pytest.mark.skipif("cpu" not in MACHINE_CGROUPS, reason="no cpu cgroup on this machine")
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: nothing to take")
def test_a_submissions_workers_share_one_core_however_many_exercises_it_has(zygote):
    """A submission's workers live until it is done: one per exercise file, each capped at a
    core, let a two-file attack hold both cores. The zygote's workers share one: three hogs
    left running by one worker and three of the next share it (0.75 CPU-seconds each over
    1.5 s), where a core each would give the second 1.5."""
    with module_of(zygote, CPU_HOG) as first, module_of(zygote, CPU_HOG) as second:
        assert first.call("background", 3.0, 3) == 3
        used = second.call("hog", 1.5, 3)
    assert 0.3 < used < 1.15


@needs_root
def test_a_worker_reads_no_grader_folder_or_pid_in_its_cgroups(zygote):
    """/proc/self/cgroup named the grader's cgroup folders, which carry its pid (an attack
    read them): a worker sees its own cgroup as the root of each hierarchy."""
    if not zygote.contained:
        pytest.skip("workers run without their own namespaces here")
    with module_of(zygote, "def groups():\n    return open('/proc/self/cgroup').read()\n") as sub:
        text = sub.call("groups")
    paths = [line.split(":", 2)[2] for line in text.splitlines()]
    assert paths and all(p == "/" for p in paths), text


def test_a_worker_holds_none_of_the_grader_modules(zygote):
    """The zygote lists the grader's modules once for every worker (`seal.prepare`): student
    code in a worker finds none of them in sys.modules, and cannot import one."""
    code = """
import sys
def ours():
    return sorted(n for n in sys.modules if n == "grader" or n.startswith("grader."))
def imports():
    found = []
    for name in ("grader", "grader.worker.child", "grader.probes.tracing"):
        try:
            __import__(name)
            found.append(name)
        except ImportError:
            pass
    return found
"""
    with module_of(zygote, code) as sub:
        assert sub.call("ours") == []
        assert sub.call("imports") == []


@pytest.mark.fast
def test_an_installed_torchgrade_keeps_its_site_packages_in_the_workers_view(
        tmp_path, monkeypatch):
    """pip-installed (a student release in a venv), torchgrade sits in the site-packages that
    holds torch and pydantic: the folders holding it are bound (`view_binds` masks all of the
    package but the worker's parts). They were left out as if they held a source checkout, and
    no zygote could start from such an install. A checkout's own folder still stays out."""
    import site

    import grader

    venv = tmp_path / "release" / ".venv"
    packages = venv / "lib" / "python3.11" / "site-packages"
    (packages / "grader").mkdir(parents=True)
    (venv / "bin").mkdir()
    monkeypatch.setattr(grader, "__file__", str(packages / "grader" / "__init__.py"))
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(packages)])
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setattr(sys, "exec_prefix", str(venv))
    assert str(venv / "lib") in sandbox._python_dirs()
    checkout = tmp_path / "checkout"
    (checkout / "grader").mkdir(parents=True)
    monkeypatch.setattr(grader, "__file__", str(checkout / "grader" / "__init__.py"))
    monkeypatch.setattr(sys, "prefix", str(checkout))  # a venv made in the checkout itself
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(checkout / "lib")])
    (checkout / "lib").mkdir()
    dirs = sandbox._python_dirs()
    assert str(checkout / "lib") in dirs and str(checkout) not in dirs


@pytest.mark.fast
def test_an_installed_course_masked_in_the_workers_view_is_no_leak(tmp_path):
    """An installed torchgrade's course lies in the bound site-packages under an empty mask:
    the self-test must accept the mask (it reported a leak, and no check server could run
    for a student release), and still report the course if the mask shows anything."""
    from grader.worker.view import leaks

    lib = tmp_path / "lib"
    course = lib / "site-packages" / "grader" / "curriculum"
    course.mkdir(parents=True)
    spec = {"allowed": [str(lib)], "masks": [str(course)], "private": [],
            "hidden": [str(course)]}
    assert str(course) not in leaks(spec)
    (course / "test_hidden.py").write_text("SECRET = 1\n")
    assert str(course) in leaks(spec)


def _killed_for_memory(group: cgroups.WorkerGroup, allocate: int) -> int:
    """Fork a process into `group` that allocates (and touches) `allocate` bytes; its status."""
    pid = os.fork()
    if pid == 0:
        try:
            group.join()
            blocks = []
            for _ in range(allocate >> 24):
                blocks.append(bytearray(1 << 24))
            os._exit(0)
        finally:
            os._exit(1)
    return os.waitpid(pid, 0)[1]


@needs_memory_cgroup
@pytest.mark.parametrize("where", ["own_limit", "elsewhere"])
def test_the_kernel_tells_a_workers_own_memory_from_the_machines(where):
    """A worker the OOM killer kills at its own limit is the student's doing ("own_limit": the
    check says it went over its limit); one killed while under its own limit, because a cgroup
    above it (the machine, a container) ran out, is not ("elsewhere": the check is lost, not
    final). The cgroup above is made here with a small limit: a real kill by the real kernel."""
    root = cgroups.ZygoteGroup.create()
    assert root is not None
    memory = [h for h in root.hierarchies if "memory" in h.controllers]
    above = None
    try:
        if where == "elsewhere":  # a "machine" of 96 MiB around a worker allowed 1 GiB
            above = cgroups.WorkerGroup.create(memory, "machine", memory=96 << 20, processes=8)
            hierarchies = [cgroups.Hierarchy(h.version, h.controllers, folder)
                           for h, folder in above.folders]
            group = cgroups.WorkerGroup.create(hierarchies, "w", memory=GiB, processes=8)
        else:
            group = cgroups.WorkerGroup.create(memory, "w", memory=96 << 20, processes=8)
        status = _killed_for_memory(group, 256 << 20)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
        assert group.oom_end() == where
        group.remove()
    finally:
        if above is not None:
            above.remove()
        root.remove()
