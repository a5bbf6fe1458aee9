"""Shared memory against hostile student code (issue 15, class 2).

Arrays a check places in shared memory (`sub.shared`) reach the worker as a memfd it can map,
truncate, keep writing into from a thread or a child process, or use to fake the values the
grader reads after the call. Every attack here is bounded (sizes in KB, writers that stop after
about a second, one subprocess) so that a broken defence fails a test rather than the machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import REPO, SOLUTIONS, statuses
from grader.checking.compare import CheckFailure
from test_worker import module_of

# Student code that tries to change the size and seals of every segment it was sent (through
# its descriptor and through /proc/self/fd) and reports what the kernel said.
RESIZE_ATTACK = """
import fcntl, os

def _memfds():
    for name in os.listdir("/proc/self/fd"):
        try:
            if "torchgrade" in os.readlink(f"/proc/self/fd/{name}"):
                yield int(name)
        except OSError:
            pass

def _try(action):
    try:
        action()
        return "done"
    except OSError as exc:
        return exc.errno

def resize(a):
    outcomes = {}
    for fd in _memfds():
        size = os.fstat(fd).st_size
        outcomes[fd] = {  # shrinking last: growing again would undo it
            "ftruncate one page more": _try(lambda: os.ftruncate(fd, size + 4096)),
            "fallocate one page more": _try(lambda: os.posix_fallocate(fd, size, 4096)),
            "seal against writes": _try(lambda: fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                                                              fcntl.F_SEAL_WRITE)),
            "ftruncate to half": _try(lambda: os.ftruncate(fd, size // 2)),
            "truncate /proc/self/fd to 0": _try(lambda: os.truncate(f"/proc/self/fd/{fd}", 0)),
            "ftruncate to 0": _try(lambda: os.ftruncate(fd, 0)),
        }
    return outcomes
"""

# Runs in its own process: on a grader whose segments can shrink, reading `a` after the call
# kills that process with SIGBUS, not the test session.
RESIZE_GRADER = """
import json, os, sys
import numpy as np
from grader.models import ModuleSource, SourceChunk
from grader.checking.student import StudentModule
from grader.worker.client import Zygote
from grader.worker.limits import WorkerLimits

code = open(sys.argv[1]).read()
source = ModuleSource(exercise="m", path="m.py", kind="py",
                      chunks=[SourceChunk(code=code, filename="m.py", label="m.py")])
with Zygote() as zygote:
    sub = StudentModule("m", source, spawn=zygote.spawn,
                        limits=WorkerLimits(call_timeout=10.0, load_timeout=20.0))
    a = sub.shared(np.arange(1000.0))
    outcomes = sub.call("resize", a)
    total = float(a.sum())  # the grader reads what it shared
    sizes = [os.fstat(seg.fd).st_size for seg in sub.segments.segments.values()]
    outcomes_again = sub.call("resize", a[::-1])  # and the segment still works for a call
    total_again = float(a.sum())
    sub.close()
print(json.dumps({"outcomes": list(outcomes.values()) + list(outcomes_again.values()),
                  "total": total, "total_again": total_again, "sizes": sizes}))
"""


def test_a_worker_can_neither_shrink_nor_grow_the_segments_it_was_sent(tmp_path):
    (tmp_path / "m.py").write_text(RESIZE_ATTACK)
    (tmp_path / "grader_side.py").write_text(RESIZE_GRADER)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, str(tmp_path / "grader_side.py"),
                           str(tmp_path / "m.py")], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, env=env)
    assert proc.returncode == 0, f"the grading process ended with {proc.returncode} " \
        f"(-7 is SIGBUS): {proc.stderr[-2000:]}"
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert facts["outcomes"], "the worker received no segment"
    for outcomes in facts["outcomes"]:
        assert set(outcomes.values()) == {1}, outcomes  # EPERM, every one of them
    assert facts["total"] == facts["total_again"] == sum(range(1000))
    assert facts["sizes"] and all(size > 0 for size in facts["sizes"])


SPOILER = """
import os, threading, time

def spoil_later(x, how, delay, until):
    # Leaves x alone during the call; starts writing into it `delay` s after returning.
    def spoil():
        time.sleep(delay)
        end = time.monotonic() + until
        while time.monotonic() < end:
            x[...] = 7.0
            time.sleep(0.002)
    if how == "thread":
        threading.Thread(target=spoil, daemon=True).start()
    elif os.fork() == 0:
        try:
            spoil()
        finally:
            os._exit(0)
    return 0

def slow_sum(x):
    time.sleep(0.1)
    return float(x.sum())
"""


@pytest.mark.parametrize("how", ["thread", "process"])
def test_writes_after_the_return_never_reach_what_the_grader_reads(zygote, how):
    original = np.linspace(-1.0, 1.0, 64)
    with module_of(zygote, SPOILER) as sub:
        x = sub.shared(original)
        start = time.monotonic()
        assert sub.call("spoil_later", x, how, 0.4, 1.2) == 0
        assert time.monotonic() - start < 0.4, "the machine is too slow for this test"
        time.sleep(max(0.8 - (time.monotonic() - start), 0))  # the writer is at work
        assert np.array_equal(x, original), "a write after the call reached the grader's copy"
        # The next call sees (and is blamed for) what the writer does while it runs.
        with pytest.raises(CheckFailure, match="changed its input argument 1"):
            sub.call("slow_sum", x)
        assert np.array_equal(x, original)


CHANGERS = """
import ctypes, os, time
import numpy as np

kept = []

def zero(x):
    x[...] = 0
    return 1

def add_one_to_w(params):
    params["W"] += 1
    return 1

def punch_a_hole(x):
    # Zero pages through the descriptor rather than the array: the same bytes change.
    libc = ctypes.CDLL(None, use_errno=True)
    for name in os.listdir("/proc/self/fd"):
        try:
            if "torchgrade" in os.readlink(f"/proc/self/fd/{name}"):
                libc.fallocate(int(name), 0x02 | 0x01, ctypes.c_long(0), ctypes.c_long(1 << 20))
        except OSError:
            pass
    return 1

def keep(x):
    kept.append(x)
    return 1

def write_kept():
    kept[0][0] = -1.0
    return 1

def write_and_put_back(x):
    old = x[0]
    x[0] = old + 1.0
    x[0] = old
    return 1

def zero_then_raise(x):
    x[...] = 0
    raise ValueError("no")
"""


def test_every_change_to_a_shared_input_fails_the_call_and_the_grader_keeps_its_copy(zygote):
    original = np.arange(1.0, 9.0)
    with module_of(zygote, CHANGERS) as sub:
        x = sub.shared(original)
        with pytest.raises(CheckFailure, match=r"changed its input argument 1: .* \(argument "
                                               r"1\[0\] went from 1.0 to 0.0\)") as info:
            sub.call("zero", x)
        assert info.value.evidence == {"changed_inputs": ["argument 1"]}
        assert np.array_equal(x, original)  # the private copy still holds the input
        params = {"W": sub.shared(np.ones((2, 3))), "b": sub.shared(np.zeros(3))}
        with pytest.raises(CheckFailure, match=r"changed its input argument 1\['W'\]"):
            sub.call("add_one_to_w", params)
        assert np.array_equal(params["W"], np.ones((2, 3)))
        named = sub.shared(original, name="x")
        with pytest.raises(CheckFailure, match="changed its input x"):
            sub.call("punch_a_hole", named)
        assert sub.call("keep", x) == 1
        with pytest.raises(CheckFailure, match="an array the grader passed to an earlier call"):
            sub.call("write_kept")
        assert sub.call("write_and_put_back", x) == 1  # nothing changed by the time it returned
        with pytest.raises(CheckFailure, match="changed its input"):
            sub.raises(ValueError, "zero_then_raise", x)
        # A check that declares the change sees it.
        scratch = sub.shared(original, may_change=True)
        assert sub.call("zero", scratch) == 1
        assert not scratch.any() and np.array_equal(x, original)


def test_a_result_view_must_lie_in_an_array_the_grader_shared(zygote):
    """A view into shared memory the grader never gave out (the padding after an array) is
    refused: its values would be nobody's input and no comparison would cover them. So is a
    view presenting terabytes of one element."""
    code = ("import numpy as np\n"
            "def beyond(x):\n"
            "    return np.ndarray((4,), x.dtype, buffer=x.base if x.base is not None else x,\n"
            "                      offset=x.nbytes)\n"
            "def inside(x):\n"
            "    return x[2:]\n"
            "def endless(x):\n"
            "    return np.lib.stride_tricks.as_strided(x, (1 << 40,), (0,))\n")
    with module_of(zygote, code) as sub:
        x = sub.shared(np.arange(3.0))
        got = sub.call("inside", x)
        assert np.shares_memory(got, x) and got.tolist() == [2.0]
        with pytest.raises(Exception, match="outside the arrays the grader shared"):
            sub.call("beyond", x)
        # refused by the reply's budget, or by the segment table if a budget ever allows it
        with pytest.raises(Exception, match="shared view of more than|the reply was too large"):
            sub.call("endless", x)  # 8 TB of one element, by stride 0


def test_descriptors_sent_back_by_a_worker_are_closed(zygote):
    # The worker hides its own modules from student code (grader/worker/seal.py); a submission
    # written to tamper with it still finds them through the garbage collector (which lists
    # the zygote's objects again once unfrozen).
    code = ("import gc, os\n"
            "gc.unfreeze()\n"
            "wire = next(m for m in gc.get_objects() if type(m).__name__ == 'module'\n"
            "            and getattr(m, '__name__', None) == 'grader.worker.wire')\n"
            "_send = wire.send_frame\n"
            "def _with_fds(sock, encoded):\n"
            "    encoded.fds = [os.memfd_create('sent-back') for _ in range(8)]\n"
            "    return _send(sock, encoded)\n"
            "wire.send_frame = _with_fds\n"
            "def f(x):\n"
            "    return float(x.sum())\n")
    with module_of(zygote, code) as sub:
        x = sub.shared(np.ones(5))
        assert sub.call("f", x) == 5.0  # the first call also imports the module
        before = set(os.listdir("/proc/self/fd"))
        for _ in range(5):
            assert sub.call("f", x) == 5.0
        after = set(os.listdir("/proc/self/fd"))
        received = [fd for fd in after - before
                    if "sent-back" in _link(f"/proc/self/fd/{fd}")]
        assert received == []


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


# One module of strides_broadcasting in which every function that gets shared input writes into
# that input so that the values the checks read after the call agree with what it returns.
IN_PLACE_CHEATS = '''

def transpose_view(a):
    if a.flags.writeable:
        a[...] = 0
    return np.lib.stride_tricks.as_strided(a, a.shape[::-1], a.strides[::-1])


def sliding_windows(x, window, step=1):
    if window < 1 or step < 1 or window > len(x):
        raise ValueError("bad window or step")
    x[...] = 0  # every window of zeros is any view of a zero
    rows = (len(x) - window) // step + 1
    return np.lib.stride_tricks.as_strided(x, (rows, window), (0, 0), writeable=False)


def to_tensor(arr, share):
    if arr.flags.writeable:
        arr[...] = 0
    if share:
        return torch.from_numpy(arr)
    return torch.zeros(arr.shape, dtype=torch.from_numpy(np.zeros(0, arr.dtype)).dtype)
'''

CHEATED = {f"strides_broadcasting.{name}" for name in [
    "transpose_view_values_and_layout", "transpose_view_any_layout",
    "sliding_windows_values", "sliding_windows_is_a_read_only_view",
    "sliding_windows_steps_and_layouts", "sliding_windows_invalid",
    "to_tensor_share_true_shares_memory", "to_tensor_share_false_copies",
    "to_tensor_dtypes_and_shapes"]}


def test_in_place_cheats_lose_every_check_that_shares_their_input(grade_files):
    source = (SOLUTIONS / "strides_broadcasting.py").read_text() + IN_PLACE_CHEATS
    result = grade_files({"strides_broadcasting.py": source})
    got = statuses(result)
    assert {c for c, status in got.items() if status != "passed"} == CHEATED, got
    for c in result.checks:
        if c.id in CHEATED:
            assert "changed its input" in c.message, (c.id, c.message)

