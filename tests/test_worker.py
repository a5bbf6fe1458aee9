"""The trust boundary: what student code can and cannot do to the grader."""

import os
import re
import time
from contextlib import contextmanager

import numpy as np
import pytest

from conftest import CHECKS_DIR
from grader.models import ModuleSource, SourceChunk
from grader.checking.student import ModuleUnavailable, StudentError, StudentModule, StudentRaised
from grader.worker.client import OutputBuffer
from grader.worker.limits import WorkerLimits

FAST = WorkerLimits(call_timeout=2.0, load_timeout=3.0)


@contextmanager
def module_of(zygote, code: str, limits: WorkerLimits = FAST):
    """The module `m` made of `code`, loaded on first use and closed at the end."""
    chunks = [SourceChunk(code=code, filename="m.py", label="m.py")]
    source = ModuleSource(exercise="m", path="m.py", kind="py", chunks=chunks)
    module = StudentModule("m", source, spawn=zygote.spawn, limits=limits)
    try:
        yield module
    finally:
        module.close()


def test_the_warm_parent_is_single_threaded(zygote):
    assert zygote.threads == 1


def test_worker_sees_no_grader_internals(zygote):
    with module_of(zygote, "import sys\n"
                            "def loaded():\n"
                            "    return sorted(sys.modules)\n"
                            "def threads(): import os; return len(os.listdir('/proc/self/task'))\n"
                            "def env(): import os; return dict(os.environ)\n"
                            "def cwd(): import os; return os.getcwd()\n") as sub:
        loaded = sub.call("loaded")
        checks = {p.stem for p in CHECKS_DIR.glob("*.py")}
        assert not [m for m in loaded if m in checks or m.startswith((
            "grader.curriculum", "grader.running.runner", "grader.checking.plugin"))]
        assert sub.call("threads") == 1
        env = sub.call("env")
        assert env["OMP_NUM_THREADS"] == "1" and "PYTHONPATH" not in env
        assert sub.call("cwd") == env["HOME"]  # a private scratch folder


OPTIMIZER_STEP = ("import sys, torch\n"
                  "def dynamo(): return type(sys.modules.get('torch._dynamo')).__name__\n"
                  "def step():\n"
                  "    p = torch.nn.Parameter(torch.ones(2))\n"
                  "    opt = torch.optim.SGD([p], lr=0.25)\n"
                  "    for _ in range(2):\n"
                  "        opt.zero_grad()\n"
                  "        p.sum().backward()\n"
                  "        opt.step()\n"
                  "    return p.detach().tolist()\n"
                  "def compiled():\n"
                  "    f = torch.compile(lambda x: x * 2 + 1, backend='eager')\n"
                  "    return f(torch.ones(2)).tolist()\n")


def test_a_zygote_told_no_optimizers_defers_dynamo_and_its_workers_still_train_and_compile(
        zygote):
    """`Zygote(optimizers=False)` (a cold local check of exercises without optimizers) forks
    workers with torch._dynamo deferred (`grader.worker.deferred_dynamo`): one that steps an
    optimizer anyway trains as usual without importing it; one that compiles gets the real
    module. The default zygote keeps the warm import of the real one."""
    from grader.worker.client import Zygote

    with module_of(zygote, OPTIMIZER_STEP) as sub:
        assert sub.call("dynamo") == "module"
    with Zygote(optimizers=False) as cold:
        with module_of(cold, OPTIMIZER_STEP, WorkerLimits(call_timeout=60.0)) as sub:
            assert sub.call("dynamo") == "DeferredDynamo"
            assert sub.call("step") == [0.5, 0.5]  # two steps of 0.25
            assert sub.call("dynamo") == "DeferredDynamo"
            assert sub.call("compiled") == [3.0, 3.0]
            assert sub.call("dynamo") == "module"
            assert sub.call("step") == [0.5, 0.5]


def test_a_zygote_started_from_a_thread_that_ends_outlives_the_thread(caplog):
    """A grading process starts its zygote in a thread while pytest collects. The zygote asks
    to die with its parent, which the kernel reads as the thread that started it: it was
    killed as soon as that thread ended, and the next spawn had to start another ("the worker
    parent died ... restarting it")."""
    import threading

    from grader.worker.client import Zygote

    started: list[Zygote] = []
    thread = threading.Thread(target=lambda: started.append(Zygote(optimizers=False)))
    thread.start()
    thread.join()
    with started[0] as z:
        first = z.process.pid
        time.sleep(0.5)  # the kernel's SIGKILL is not synchronous with the thread's end
        assert z.process.poll() is None
        with module_of(z, "def f(): return 7\n") as sub:
            assert sub.call("f") == 7
        assert z.process.pid == first
        assert "died" not in caplog.text


SLOW = "import time\ndef slow(s):\n    time.sleep(s)\n    return 1\ndef fast():\n    return 2\n"


def test_a_check_whose_calls_spend_its_budget_is_stopped_and_the_next_check_has_its_own(zygote):
    """Calls that each end just under their deadline cannot keep one check busy for minutes:
    all of a check's calls share `check_budget` (at least twice the longest deadline it gave),
    and the call that would pass it is cut there."""
    limits = FAST.model_copy(update={"call_timeout": 1.0, "check_budget": 2.0})
    with module_of(zygote, SLOW, limits) as sub:
        assert sub.call("slow", 0.7) == 1 and sub.call("slow", 0.7) == 1  # 1.4 s of 2
        started = time.monotonic()
        with pytest.raises(StudentError) as caught:
            sub.call("slow", 0.9)  # within its own deadline (1 s), not within what is left
        assert time.monotonic() - started < 0.85
        assert caught.value.status == "timeout"
        assert "this check's calls into your code took 2 s in all" in str(caught.value)
        sub.end_check()
        assert sub.call("slow", 0.9) == 1  # a new check, a new budget
        # A call given a longer deadline than the budget still gets all of it.
        assert sub.call("slow", 2.5, timeout=3.0) == 1


def test_a_submission_that_spent_its_budget_is_stopped_and_its_other_checks_are_not_run(
        zygote):
    """All the modules of a submission share one budget (`GradingSession`): once it is spent,
    the call that passes it is cut, and no other call or import is even started."""
    from grader.checking.plugin import GradingSession
    from grader.models import Submission

    session = GradingSession(Submission(student="s", root="."), limits=FAST, zygote=zygote)
    assert session.module("a").budget is session.module("b").budget
    budget = session.budget
    with module_of(zygote, SLOW) as first:
        first.budget = budget
        assert first.call("fast") == 2
        assert budget.spent > 0  # the import and the call are counted
        budget.spent = budget.seconds - 0.3  # as if the submission had run that long
        with pytest.raises(StudentError) as caught:
            first.call("slow", 0.9)
        assert caught.value.status == "timeout"
        assert str(caught.value).startswith("slow(0.9) was stopped: your code has used the "
                                            f"{budget.seconds:g} s that all the checks")
        with module_of(zygote, SLOW) as second:
            second.budget = budget
            started = time.monotonic()
            with pytest.raises(StudentError) as caught:
                second.call("fast")
            assert time.monotonic() - started < 0.1 and second._worker is None  # not spawned
            assert str(caught.value).startswith("This check was not run: your code has used")


def test_a_longer_timeout_makes_the_submissions_budget_longer():
    """`--timeout 60` (slow exercises of a course) must not cut honest submissions at the
    default 15 min: the budget is 180 deadlines at least."""
    from grader.commands.common import limits_of

    assert limits_of(None).submission_budget == limits_of(2.0).submission_budget == 900
    assert limits_of(60.0).submission_budget == 180 * 60.0


def test_a_timeout_fails_only_that_call_and_a_fresh_worker_serves_the_next(zygote):
    with module_of(zygote, "import time\nstate = []\n"
                            "def slow(): time.sleep(60)\n"
                            "def ok(x): state.append(x); return len(state)\n") as sub:
        assert sub.call("ok", 1) == 1
        start = time.monotonic()
        with pytest.raises(StudentError) as info:
            sub.call("slow", timeout=0.5)
        assert info.value.status == "timeout" and "timed out after 0.5 s" in str(info.value)
        assert time.monotonic() - start < 3
        assert sub.call("ok", 2) == 1  # a fresh import: the old worker's state is gone


def test_a_timeout_says_where_the_code_was_and_keeps_its_stack_out_of_the_output(zygote):
    """"timed out" alone left a student looking for the loop: the worker is asked for its
    stack before it is killed (messages.WHERE_SIGNAL, through the keeper and init of its
    namespaces), and the innermost line of the student's own file is named."""
    code = ("def helper(n):\n    while n >= 0:\n        n = n + 1\n\n"
            "def spin():\n    print('started')\n    return helper(0)\n")
    with module_of(zygote, code) as sub:
        with pytest.raises(StudentError) as info:
            sub.call("spin", timeout=0.5)
        assert info.value.status == "timeout"
        # (the loop's own line or its body's, wherever the signal found it: so not in the
        # message, which two gradings must give alike)
        assert str(info.value).endswith("(an endless loop, or far too slow).")
        assert re.fullmatch(r"m\.py, line [23], in helper: `(while n >= 0:|n = n \+ 1)`",
                            info.value.stopped_at), info.value.stopped_at
        output = sub.end_check()
        assert "started" in output and "most recent call first" not in output
    # The main thread's line, not that of a thread of the student's that also runs
    threaded = ("import threading, time\n\ndef tick():\n    while True:\n"
                "        time.sleep(0.001)\n\ndef spin():\n"
                "    threading.Thread(target=tick, daemon=True).start()\n"
                "    while True:\n        pass\n")
    with module_of(zygote, threaded) as sub:
        with pytest.raises(StudentError) as info:
            sub.call("spin", timeout=0.5)
        assert info.value.stopped_at.startswith("m.py, line ")
        assert ", in spin: `" in info.value.stopped_at, info.value.stopped_at  # (line 9 or 10)


@pytest.mark.parametrize("body, words", [
    ("import os; os._exit(3)", "exited with status 3"),
    ("import ctypes; ctypes.string_at(0)", "segmentation fault"),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "killed"),
])
def test_crashes_fail_the_call_with_a_plain_message(zygote, body, words):
    with module_of(zygote, f"def boom():\n    {body}\ndef ok():\n    return 'fine'\n") as sub:
        with pytest.raises(StudentError) as info:
            sub.call("boom")
        assert info.value.status == "crashed" and words in str(info.value)
        assert sub.call("ok") == "fine"


def test_memory_limit_is_a_crash_not_a_hang(zygote):
    with module_of(zygote, "import numpy as np\ndef hog():\n    return np.ones(10**10)\n"
                            "def ok():\n    return 1\n") as sub:
        with pytest.raises(StudentError) as info:
            sub.call("hog")
        assert info.value.status == "crashed" and "memory" in str(info.value)
        assert sub.call("ok") == 1


def test_a_full_collection_in_a_worker_copies_none_of_the_zygotes_heap(zygote):
    """The zygote's objects (torch's and the rest, ~280,000) are frozen out of the collector's
    passes before any fork: a worker whose code runs a full collection (student code, torch, or
    enough new objects to trigger one) does not walk them and so copies none of the pages it
    shares with the zygote. Measured: ~2 MB private after `gc.collect()`, against ~70 MB
    without the freeze."""
    code = """
import gc
def private_mb_after_collect():
    gc.collect()
    total = 0
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith(("Private_Clean", "Private_Dirty")):
                total += int(line.split()[1])
    return total / 1024
"""
    with module_of(zygote, code) as sub:
        mb = sub.call("private_mb_after_collect")
        assert mb < 25


def test_processes_started_by_student_code_die_with_the_worker(zygote):
    marker = f"{time.time_ns() % 10**6}.25"  # a unique `sleep` argument, found on the host
    with module_of(zygote, "import subprocess, time, os\n"
                            "def spawn(marker):\n"
                            "    subprocess.Popen(['sleep', marker], start_new_session=True)\n"
                            "    if os.fork() == 0:\n"
                            "        os.setsid()\n"
                            "        subprocess.Popen(['sleep', marker])\n"
                            "        os._exit(0)\n"
                            "    time.sleep(60)\n") as sub:
        with pytest.raises(StudentError):
            sub.call("spawn", marker, timeout=1.0)
        assert _wait_until(lambda: not _processes_with(marker)), _processes_with(marker)


def test_an_exercises_worker_ends_when_the_checks_move_on_and_comes_back_if_needed(zygote):
    """A submission's workers run one exercise at a time: each may hold memory up to its limit,
    and kept to the end of the submission, ten exercises held ten times that. Its processes
    end with it; a check that needs the module again gets a fresh worker."""
    from grader.checking.plugin import GradingSession
    from grader.models import Submission

    marker = f"{time.time_ns() % 10**6}.75"

    def source(name: str, code: str) -> ModuleSource:
        return ModuleSource(exercise=name, path=f"{name}.py", kind="py",
                            chunks=[SourceChunk(code=code, filename=f"{name}.py",
                                                label=f"{name}.py")])

    holder = source("a", "import subprocess\n"
                         f"subprocess.Popen(['sleep', '{marker}'], start_new_session=True)\n"
                         "def answer(): return 42\n")
    other = source("b", "def answer(): return 7\n")
    grading = GradingSession(Submission(student="s", root="/nowhere",
                                        modules={"a": holder, "b": other}),
                             limits=FAST, zygote=zygote)
    try:
        assert grading.module("a").call("answer") == 42 and _processes_with(marker)
        assert grading.module("b").call("answer") == 7
        assert _wait_until(lambda: not _processes_with(marker)), _processes_with(marker)
        assert grading.module("a").call("answer") == 42  # started again
    finally:
        grading.close()
    assert _wait_until(lambda: not _processes_with(marker)), _processes_with(marker)


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if marker.encode() in f.read() and _alive(int(entry)):
                        found.append(int(entry))
            except OSError:
                pass
    return found


def _wait_until(condition, seconds: float = 3.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("code, status, words", [
    ("raise ValueError('bad top level')\n", "error", "ValueError: bad top level"),
    ("import sys\nsys.exit(4)\n", "error", "sys.exit(4)"),
    ("while True:\n    pass\n", "timeout", "timed out"),
    ("import os\nos._exit(0)\n", "crashed", "exited with status 0"),
    ("import no_such_package_xyz\n", "error", "ModuleNotFoundError"),
])
def test_import_failures_fail_every_call_with_one_message(zygote, code, status, words):
    with module_of(zygote, code + "def f():\n    return 1\n") as sub:
        for _ in range(2):
            with pytest.raises(ModuleUnavailable) as info:
                sub.call("f")
            assert info.value.status == status and words in str(info.value)


def test_a_large_file_is_compiled_only_by_the_worker_which_names_its_syntax_error(zygote):
    """The grading process compiles no source over PIECE_CHARS (1.2 GB for a 1.9 MB file of
    names, outside the worker's limits); the worker's import says the syntax error."""
    from grader.intake.budget import PIECE_CHARS, AnalysisBudget
    from grader.intake.submission import syntax_problem

    code = "x = 1\n" * (PIECE_CHARS // 6 + 1) + "def f(:\n    pass\n"
    chunk = SourceChunk(code=code, filename="m.py", label="m.py")
    assert syntax_problem(chunk, AnalysisBudget()) is None
    assert syntax_problem(SourceChunk(code="def f(:\n", filename="m.py", label="m.py"),
                          AnalysisBudget())
    line = code.count("\n") - 1
    with module_of(zygote, code) as sub:
        with pytest.raises(ModuleUnavailable) as info:
            sub.call("f")
    assert f"line {line}): SyntaxError: invalid syntax" in str(info.value), str(info.value)


def test_import_error_names_the_line(zygote):
    with module_of(zygote, "x = 1\n\ny = 1 / 0\n") as sub:
        with pytest.raises(ModuleUnavailable) as info:
            sub.call("f")
        assert "line 3" in str(info.value) and "ZeroDivisionError" in str(info.value)


def test_exceptions_carry_type_mro_and_student_frames_only(zygote):
    with module_of(zygote, "class Mine(ValueError):\n    pass\n"
                            "def f():\n    raise Mine('no')\n") as sub:
        with pytest.raises(StudentRaised) as info:
            sub.call("f")
        err = info.value
        assert err.type == "Mine" and "ValueError" in err.mro
        assert 'File "m.py", line 4, in f' in err.detail and "grader" not in err.detail
        sub.raises(ValueError, "f")  # a subclass counts


def test_missing_function_costs_only_its_call(zygote):
    with module_of(zygote, "def present():\n    return 2\n") as sub:
        with pytest.raises(StudentError) as info:
            sub.call("absent")
        assert "defines no absent" in str(info.value)
        assert sub.call("present") == 2


def test_monkeypatching_in_the_worker_does_not_reach_the_grader(zygote):
    with module_of(zygote, "import numpy as np, torch\n"
                            "np.allclose = lambda *a, **k: True\n"
                            "np.array_equal = lambda *a, **k: True\n"
                            "torch.allclose = lambda *a, **k: True\n"
                            "def f():\n    return np.zeros(3)\n") as sub:
        got = sub.call("f")
        assert not np.array_equal(got, np.ones(3))  # the grader's numpy is untouched
        assert type(got) is np.ndarray


def test_sabotaging_the_workers_builtins_only_breaks_the_submission(zygote):
    with module_of(zygote, "import builtins\nbuiltins.isinstance = lambda *a: True\n"
                            "def f():\n    return 1\n") as sub:
        with pytest.raises(StudentError) as info:
            sub.call("f")
        assert info.value.status in ("crashed", "error")


def test_output_is_captured_per_check_and_bounded(zygote):
    limits = WorkerLimits(call_timeout=5.0, output_bytes=4096)
    with module_of(zygote, "import sys\nprint('at import')\n"
                            "def chatty(n):\n    print('x' * n)\n"
                            "    print('to stderr', file=sys.stderr)\n"
                            "    return n\n", limits) as sub:
        assert sub.call("chatty", 10) == 10
        assert sub.import_output == "at import\n"
        assert sub.end_check() == "x" * 10 + "\nto stderr\n"
        assert sub.call("chatty", 10_000_000) == 10_000_000
        text = sub.end_check()
        assert len(text) < 4096 + 200 and "bytes of output omitted" in text
        assert text.rstrip().endswith("to stderr")


@pytest.mark.parametrize("size", [1, 100, 65536])
def test_a_worker_that_floods_its_output_costs_the_grader_little_cpu(zygote, size):
    # Woken at every write, the grader used as much CPU as the flood lasted (2 s here, outside
    # the worker's CPU cap); with reads spaced out it uses well under a tenth of that.
    flood = ("import os, time\n"
             "def flood(seconds, size):\n"
             "    end, chunk, n = time.monotonic() + seconds, b'x' * size, 0\n"
             "    while time.monotonic() < end:\n"
             "        os.write(1, chunk)\n"
             "        n += 1\n"
             "    os.write(1, b'the end')\n"
             "    return n\n")
    with module_of(zygote, flood, WorkerLimits(call_timeout=10.0, output_bytes=4096)) as sub:
        sub.call("flood", 0.01, 1)
        sub.end_check()
        before = time.thread_time()
        assert sub.call("flood", 2.0, size) > 0
        assert time.thread_time() - before < 0.6
        text = sub.end_check()
        assert "bytes of output omitted" in text and text.endswith("the end")


def test_the_line_count_says_when_a_call_ran_code_in_another_process(zygote):
    """Lines run in a forked child or another program escape the count of `count_steps`:
    the probe says how many processes the call forked or ran (a loop over rows passed the
    vectorised check in a forked child); a thread that only sleeps, started at import, is no
    thread of the call's."""
    code = ("import os, subprocess, sys, threading, time\n"
            "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
            "def plain(n):\n    return n + 1\n"
            "def forked(n):\n"
            "    pid = os.fork()\n"
            "    if pid == 0:\n"
            "        sum(range(n))\n"
            "        os._exit(0)\n"
            "    os.waitpid(pid, 0)\n"
            "    return n\n"
            "def ran(n):\n"
            "    return subprocess.run([sys.executable, '-c', 'pass']).returncode\n")
    with module_of(zygote, code, WorkerLimits(call_timeout=20.0)) as sub:
        counted = {name: sub.probe("tracing:count_steps", name, 1000, label=name)
                   for name in ("plain", "forked", "ran")}
    assert counted["plain"]["processes"] == 0 and counted["plain"]["threads"] == 0
    assert counted["forked"]["processes"] >= 1
    assert counted["ran"]["processes"] >= 1


def test_output_buffer_keeps_head_and_tail():
    buf = OutputBuffer(10)
    buf.add(b"abcdefghijklmnop")
    text = buf.take()
    assert text.startswith("abcde") and text.endswith("lmnop") and "6 bytes" in text
    assert buf.take() == ""


def test_not_plain_results_are_refused(zygote):
    with module_of(zygote, "class Fake(tuple):\n    def __eq__(self, o):\n        return True\n"
                            "def f():\n    return Fake((1, 2))\n") as sub:
        with pytest.raises(StudentError) as info:
            sub.call("f")
        assert "not plain data" in str(info.value) and "Fake" in str(info.value)


@pytest.mark.parametrize("body, words", [
    ("x = []\n    for _ in range(200):\n        x = [x]\n    return x",
     "f() returned a value nested more than 64 levels deep: return the kind of value"),
    ("x = []\n    x.append(x)\n    return x", "f() returned a value nested more than"),
    # Python refuses to write an int of over 4,300 digits as text: the worker exited (70).
    ("return [1, 2 ** 100_000]", "f() returned an integer of 100001 bits, larger than"),
])
def test_a_result_that_cannot_be_sent_is_said_plainly(zygote, body, words):
    with module_of(zygote, f"def f():\n    {body}\n") as sub:
        with pytest.raises(StudentError) as info:
            sub.call("f")
        assert str(info.value).startswith(words), str(info.value)


def test_notebook_cells_keep_going_after_an_error(zygote):
    chunks = [SourceChunk(code="def f():\n    return 1\n", filename="nb [cell 1]", label="cell 1",
                          keep_going=True),
              SourceChunk(code="raise RuntimeError('scratch')\n", filename="nb [cell 2]",
                          label="cell 2", keep_going=True),
              SourceChunk(code="def g():\n    return f() + 1\n", filename="nb [cell 3]",
                          label="cell 3", keep_going=True)]
    source = ModuleSource(exercise="m", path="m.ipynb", kind="ipynb", chunks=chunks)
    sub = StudentModule("m", source, spawn=zygote.spawn, limits=FAST)
    try:
        assert sub.call("g") == 2
        assert len(sub.notes) == 1 and "cell 2" in sub.notes[0] and "scratch" in sub.notes[0]
    finally:
        sub.close()


def test_a_notebook_of_many_failing_cells_keeps_its_definitions(zygote):
    """250 scratch cells that raise: the load's reply went over the wire's limits and the
    notebook scored 0; the first cell errors are said, then how many more."""
    scratch = "x = [" + "a, " * 450 + "]\n"
    chunks = [SourceChunk(code="def f():\n    return 1\n", filename="nb [cell 1]",
                          label="cell 1", keep_going=True)]
    chunks += [SourceChunk(code=scratch, filename=f"nb [cell {i}]", label=f"cell {i}",
                           keep_going=True) for i in range(2, 252)]
    source = ModuleSource(exercise="m", path="m.ipynb", kind="ipynb", chunks=chunks)
    sub = StudentModule("m", source, spawn=zygote.spawn, limits=FAST)
    try:
        assert sub.call("f") == 1
        assert len(sub.notes) == 101 and "cell 2:" in sub.notes[0]
        assert sub.notes[-1].startswith("... and 150 more cells raised an error")
    finally:
        sub.close()


def test_future_imports_of_one_cell_hold_for_the_next(zygote):
    chunks = [SourceChunk(code="from __future__ import annotations\n", filename="nb [cell 1]",
                          label="cell 1", keep_going=True),
              SourceChunk(code="def f() -> NotDefinedYet:\n    return 3\n",
                          filename="nb [cell 2]", label="cell 2", keep_going=True)]
    source = ModuleSource(exercise="m", path="m.ipynb", kind="ipynb", chunks=chunks)
    sub = StudentModule("m", source, spawn=zygote.spawn, limits=FAST)
    try:
        assert sub.call("f") == 3 and sub.notes == []
    finally:
        sub.close()


def test_shared_inputs_show_in_place_writes(zygote):
    with module_of(zygote, "def scale(a):\n    a *= 2\n    return a[::-1]\n") as sub:
        a = sub.shared(np.arange(4.0), may_change=True)  # declared: the call writes into it
        got = sub.call("scale", a)
        assert np.array_equal(a, [0, 2, 4, 6])  # the worker wrote into the grader's memory
        assert np.shares_memory(got, a) and got.strides == (-8,)


def test_no_worker_processes_are_left_behind(zygote):
    marker = f"{time.time_ns() % 10**6}.75"
    with module_of(zygote, "import subprocess\n"
                           "def start(marker):\n"
                           "    subprocess.Popen(['sleep', marker])\n"
                           "    return 1\n") as sub:
        assert sub.call("start", marker) == 1
        host_pid = sub._worker.pid
        assert _alive(host_pid) and _processes_with(marker)
    assert _wait_until(lambda: not _alive(host_pid) and not _processes_with(marker))


def test_workers_are_contained_when_the_machine_allows(zygote):
    """On a machine where the grader runs as root with bubblewrap (like CI), isolation is full:
    the worker runs as its own uid, as PID 2 of its own namespace, without network, and sees
    none of the grader's files."""
    if zygote.isolation != "full":
        pytest.skip(f"isolation is {zygote.isolation} here: {zygote.missing}")
    with module_of(zygote, "import os, socket\n"
                            "def facts(paths):\n"
                            "    try:\n"
                            "        socket.create_connection(('127.0.0.1', 22), timeout=1)\n"
                            "        net = 'connected'\n"
                            "    except OSError as e:\n"
                            "        net = e.strerror\n"
                            "    def read(p):\n"
                            "        try:\n"
                            "            return open(p).read()\n"
                            "        except OSError:\n"
                            "            return ''\n"
                            "    return os.getuid(), os.getpid(), net, "
                            "[read(p) for p in paths]\n") as sub:
        import grader
        from pathlib import Path
        root = Path(grader.__file__).parent
        secrets = [str(root / "checks" / "test_strides_broadcasting_hidden.py"),
                   str(root / "compare.py"), __file__]
        uid, pid, net, seen = sub.call("facts", secrets)
        assert uid != 0 and pid == 2 and "unreachable" in net.lower()
        assert seen == ["", "", ""]  # missing, or (in an installed package) emptied


def test_without_isolation_a_killed_parent_is_restarted():
    """Below full isolation a worker can reach its parent; the batch must survive that."""
    from grader.worker.client import Zygote

    with Zygote(isolate=False) as bare:
        assert bare.isolation == "none" and "bubblewrap" in bare.missing
        with module_of(bare, "import os, signal\n"
                                 "def kill_parent():\n"
                                 "    os.kill(os.getppid(), signal.SIGKILL)\n"
                                 "    return 1\n") as killer:
            try:
                killer.call("kill_parent")  # the worker may die with its parent, or not
            except StudentError as exc:
                assert exc.status == "crashed"
        with module_of(bare, "def ok():\n    return 'fine'\n") as after:
            assert after.call("ok") == "fine"
