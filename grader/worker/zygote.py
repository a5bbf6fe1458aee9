"""The warm parent: imports torch and numpy once, then forks a worker per request.

Run as `python -m grader.worker.zygote CTRL_FD` by `client.Zygote` (inside bubblewrap when the
machine allows, see `sandbox.py`), never forked from the grader: the grader process holds checks
and reference values, and a fork would copy them into the worker. This process imports torch,
numpy, `grader.worker` and `grader.probes` only, runs no tensor operation (a fork after one can
deadlock the child
in torch's thread pools) and stays single-threaded.

A contained worker (when the self-test at start-up passes) is three processes:

    zygote -> keeper (setsid; mirrors the worker's exit status; the grader kills its group)
                -> init (PID 1 of new PID/mount/IPC/net namespaces; dies with the keeper)
                     -> worker (PID 2; drops to its own uid; serves requests)

Killing the keeper's process group kills init, and the kernel then kills every process in the
namespace, including those a student started with `setsid`. Otherwise the worker is forked
directly and the grader kills its process group.

Control protocol (frames from `wire`; each message is declared in `messages`),
grader -> zygote:
  `Spawn` {"op": "spawn", "scratch": path, "limits": {...}} with fds [worker socket, output pipe]
zygote -> grader:
  `Ready` {"op": "ready", "pid": n, "threads": n, "contained": bool, "leaks": [path, ...],
   "cgroup": {"memory": 1 | 2 | None, "pids": 1 | 2 | None}}   once, after the self-tests
  `Spawned` {"op": "spawned", "pid": n}       reply to spawn (the pid whose group to kill), or
          {"op": "spawned", "pid": None, "error": why}
  `Exited` {"op": "exited", "pid": n, "code": n | None, "signal": n | None, "memory": bool}
                                              whenever a worker ends ("memory": its cgroup
                                              killed it for going over its memory limit)

Each worker gets its own cgroup (`cgroups.WorkerGroup`, in the folders the grader made and
bound into the view, named in TORCHGRADE_CGROUPS): made here before the fork, joined by the
forked process before anything else, killed and removed here when that process is reaped.
The zygote exits, killing its workers, when the control socket closes.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import select
import signal
import socket
import struct
import sys

from grader.worker import messages

PR_SET_CHILD_SUBREAPER = 36
WARM_ENV = "TORCHGRADE_WARM_OPTIMIZERS"  # "0": do not import torch._dynamo (see `main`)


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def uid_range() -> list[int]:
    spec = os.environ.get("TORCHGRADE_UIDS", "")
    if not spec or os.geteuid() != 0:
        return []
    base, count = (int(x) for x in spec.split(":"))
    return list(range(base, base + count))


def namespaces_work(uid: int, spec: dict) -> tuple[bool, list[str]]:
    """Try, in a throwaway child, everything a contained worker does before student code, and
    prove there that the worker's view holds nothing but its allowlist (`view.leaks` of `spec`).
    Returns (whether it all worked, the paths that worker could see but should not)."""
    import json
    import shutil
    import tempfile

    from grader.worker import child, view

    scratch = tempfile.mkdtemp(prefix="selftest", dir=os.getcwd())
    leaks_r, leaks_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(leaks_r)
            child.unshare_namespaces()
            inner = os.fork()
            if inner == 0:
                try:
                    child.confine(scratch, uid)
                    with os.fdopen(leaks_w, "w") as out:
                        out.write(json.dumps(view.leaks(spec)))
                    os._exit(0 if os.getuid() == uid and os.getpid() == 1 else 1)
                except BaseException:  # noqa: BLE001
                    os._exit(1)
            os.close(leaks_w)
            _, status = os.waitpid(inner, 0)
            os._exit(0 if status == 0 else 1)
        except BaseException:  # noqa: BLE001
            os._exit(1)
    os.close(leaks_w)
    with os.fdopen(leaks_r) as source:
        text = source.read(1 << 20)
    _, status = os.waitpid(pid, 0)
    shutil.rmtree(scratch, ignore_errors=True)
    if status != 0:
        return False, []
    try:
        return True, [str(p) for p in json.loads(text)]
    except ValueError:
        return False, []


SELFTEST_BYTES = 16 << 20


def cgroups_work(hierarchies: list) -> bool:
    """Prove, in a throwaway child, that a worker's cgroup can be made and joined and that it
    charges what RLIMIT_AS misses: pages written into a memfd."""
    from grader.worker import cgroups

    if not any("memory" in h.controllers for h in hierarchies):
        return False
    try:
        group = cgroups.WorkerGroup.create(hierarchies, f"selftest-{os.getpid()}",
                                           memory=256 << 20, processes=4)
    except OSError:
        return False
    pid = os.fork()
    if pid == 0:
        try:
            group.join()
            before = group.usage()
            fd = os.memfd_create("selftest")
            block = b"\x01" * (1 << 20)
            for _ in range(SELFTEST_BYTES >> 20):
                os.write(fd, block)
            os._exit(0 if group.usage() - before >= SELFTEST_BYTES - (1 << 20) else 1)
        except BaseException:  # noqa: BLE001
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return group.remove() and status == 0


def spawn_contained(request: messages.Spawn, fds: list[int], uid: int, close: list[int],
                    group=None) -> int:
    """Fork keeper -> init -> worker (see the module docstring); returns the keeper's pid.
    The keeper moves itself into the worker's cgroup `group` before anything else."""
    from grader.worker import child
    from grader.worker.limits import die_with_parent

    keeper = os.fork()
    if keeper:
        return keeper
    try:
        if group is not None:
            group.join()
        _child_signals(close)
        os.setsid()
        die_with_parent()
        child.unshare_namespaces()
        status_r, status_w = os.pipe()
        # The grader asks a worker out of time where it was by signalling the keeper (the pid
        # it knows): passed on to init, then to the worker (whose faulthandler answers).
        signal.signal(messages.WHERE_SIGNAL, signal.SIG_IGN)
        init = os.fork()
        if init == 0:
            os.close(status_r)
            die_with_parent()
            worker = os.fork()
            if worker == 0:
                os.close(status_w)
                child.start(fds[0], fds[1], request["scratch"], request["limits"], uid=uid)
            _pass_on(messages.WHERE_SIGNAL, worker)
            for fd in fds:
                os.close(fd)
            while True:  # PID 1 reaps every orphan; it leaves when the worker does
                pid, ended = os.waitpid(-1, 0)
                if pid == worker:
                    os.write(status_w, struct.pack("i", ended))
                    os._exit(0)
        _pass_on(messages.WHERE_SIGNAL, init)
        os.close(status_w)
        for fd in fds:
            os.close(fd)
        os.waitpid(init, 0)
        data = os.read(status_r, 4)
        status = struct.unpack("i", data)[0] if len(data) == 4 else None
        if status is not None and os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            if sig not in (signal.SIGKILL, signal.SIGSTOP):
                signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        os._exit(os.WEXITSTATUS(status) if status is not None else 70)
    except BaseException:  # noqa: BLE001 - the keeper must never return into the zygote loop
        os._exit(71)


def _pass_on(sig: int, pid: int) -> None:
    """From now on, signal `sig` received here is sent on to `pid`."""
    def forward(_signum, _frame) -> None:
        try:
            os.kill(pid, sig)
        except OSError:
            pass

    signal.signal(sig, forward)


def spawn_direct(request: messages.Spawn, fds: list[int], close: list[int], group=None) -> int:
    from grader.worker import child

    pid = os.fork()
    if pid == 0:
        try:
            if group is not None:
                group.join()
        except BaseException:  # noqa: BLE001 - never run student code outside its limits
            os._exit(71)
        _child_signals(close)
        child.start(fds[0], fds[1], request["scratch"], request["limits"])
    return pid


def worker_group(hierarchies: list, serial: int, limits: dict):
    """The cgroup of the next worker (None without cgroups); OSError if it cannot be made."""
    from grader.worker import cgroups
    from grader.worker.limits import WorkerLimits

    if not hierarchies:
        return None
    parsed = WorkerLimits(**limits)
    return cgroups.WorkerGroup.create(hierarchies, f"w{serial}", parsed.memory, parsed.processes)


def _child_signals(close: list[int]) -> None:
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    for fd in close:
        os.close(fd)


def main() -> None:
    ctrl = socket.socket(fileno=int(sys.argv[1]))
    from grader.worker.limits import die_with_parent

    die_with_parent()
    warm(os.environ.pop(WARM_ENV, "1") != "0")
    run(ctrl)


def warm(optimizers: bool | None) -> None:
    """The imports every worker shares with this process (and, from a `template`, every zygote
    forked from it): no tensor operation, no thread. `optimizers`: whether torch._dynamo is
    imported for real (True), deferred (False), or left alone (None: a template, which settles
    it in each process it forks, `warm_optimizers`)."""
    import numpy  # noqa: F401 - warm imports shared by every fork
    import torch

    torch.set_num_threads(1)
    if optimizers is None:
        # A template's zygotes, of every exercise, fork many workers that take backward
        # passes: what torch imports on a pass's first use (`torch.autograd._make_grads`: sympy
        # and its symbolic shapes, ~0.3 s; torch._dynamo imports it too) is imported once here,
        # not in each worker's first call. (A launched zygote of a local check starts without.)
        import torch.fx.experimental.symbolic_shapes  # noqa: F401
    warm_optimizers(optimizers)
    # Every probe module, imported once here (each worker resolves and seals them before any
    # student code runs: `seal.py`).
    from grader.worker import seal

    seal.resolve_probes()


def warm_optimizers(optimizers: bool | None) -> None:
    """torch._dynamo, imported (True), deferred (False) or left alone (None).

    The first optimizer a process builds (or zero_grads) imports torch._dynamo: 2-3 s, with
    sympy. Imported once here (no tensor operation, no thread), not in every worker's deadline:
    student code that trains may need more of it than the deferred stand-in answers
    (`torch.use_deterministic_algorithms` imports torch._inductor, which imports it). Unless
    the grader said that its workers will build no optimizer (a local check of exercises that
    use none, whose cold start would wait for it): then deferred, so that a worker stepping one
    anyway does not import it (`grader.worker.deferred_dynamo`)."""
    if optimizers:
        import torch._dynamo  # noqa: F401
    elif optimizers is not None:
        from grader.worker.deferred_dynamo import defer

        defer()


def run(ctrl: socket.socket) -> None:
    """The zygote after its warm imports: the self-tests, `Ready`, then the spawn loop until
    `ctrl` closes. Reads its settings from the environment (TORCHGRADE_UIDS, the cgroups, the
    view's spec): a zygote forked from a `template` gets them there too."""
    from grader.worker import cgroups, seal, view, wire

    free_uids = uid_range()
    hierarchies = cgroups.from_env()
    if not cgroups_work(hierarchies):
        hierarchies = []
    spec = json.loads(os.environ.pop(view.ENV, "") or "null")  # names the grader's folders
    contained, leaks = namespaces_work(free_uids[0], spec) if free_uids and spec else (False, [])
    if free_uids and not spec:
        contained = namespaces_work(free_uids[0], EMPTY_VIEW)[0]
    if spec and not contained:
        leaks = view.leaks(spec)  # a worker forked directly sees what this process sees
    if contained:
        # Orphaned inits would otherwise go to the real init; the zygote reaps them itself.
        ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the grader, which closes us
    children: dict[int, tuple[int | None, object]] = {}  # pid -> (uid it holds, its cgroup)
    stale: list = []  # cgroups of reaped workers whose processes were still going
    serial = 0

    def send(msg: messages.Ready | messages.Spawned | messages.Exited) -> None:
        wire.send_frame(ctrl, wire.encode(msg))

    kinds = {c: h.version for h in hierarchies for c in h.controllers}
    seal.load_course_probes(os.environ.pop(seal.PROBES_ENV, None))  # before any worker exists
    seal.prepare()  # after the zygote's last import: what every worker would list again
    # Every object made so far (torch's, numpy's, ours: ~280,000) is kept for good: out of the
    # collector's passes in every worker forked from here. A full pass in a worker otherwise
    # walks them all, ~180 ms, and copies the pages it touches: ~70 MB of private memory, per
    # worker that makes enough objects to trigger one (against 0.3 ms and 1.7 MB, measured).
    gc.freeze()
    send(messages.ready(os.getpid(), _thread_count(), contained, leaks,
                        memory=kinds.get("memory"), pids=kinds.get("pids"), cpu=kinds.get("cpu")))
    try:
        while True:
            watched: list[socket.socket | int] = [ctrl, wake_r]
            readable, _, _ = select.select(watched, [], [], 0.2 if stale else None)
            if wake_r in readable:
                os.read(wake_r, 4096)
            _reap(children, free_uids, send, stale)
            stale[:] = [g for g in stale if not g.remove(wait=0)]
            if ctrl in readable:
                try:
                    doc, buffers, fds = wire.recv_frame(ctrl)
                except (EOFError, ConnectionError):
                    return
                request = wire.decode(doc, buffers)
                if not messages.is_spawn(request) or len(fds) != 2:
                    for fd in fds:
                        os.close(fd)
                    continue
                close = [ctrl.fileno(), wake_r, wake_w]
                if contained and not free_uids:
                    for fd in fds:
                        os.close(fd)
                    send(messages.not_spawned("every worker uid is in use"))
                    continue
                serial += 1
                try:
                    group = worker_group(hierarchies, serial, request["limits"])
                except OSError as exc:
                    for fd in fds:
                        os.close(fd)
                    send(messages.not_spawned(
                        f"the worker's memory limit could not be set ({exc})"))
                    continue
                if contained:
                    uid = free_uids.pop(0)  # FIFO: a freed uid is reused as late as possible
                    pid = spawn_contained(request, fds, uid, close, group)
                else:
                    uid, pid = None, spawn_direct(request, fds, close, group)
                children[pid] = (uid, group)
                for fd in fds:
                    os.close(fd)
                send(messages.spawned(pid))
    except ConnectionError:
        # The grader closed the control socket while a note was being sent (typically the
        # exit note of its last worker, killed as the grader closes): shut down as on EOF,
        # not with a BrokenPipeError traceback (and the interpreter's slow teardown after it).
        return
    finally:
        for pid, (_, group) in children.items():
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
            if group is not None:
                stale.append(group)
        _reap_all()
        for group in stale:
            group.remove()


EMPTY_VIEW: dict[str, list[str]] = {"allowed": [], "masks": [], "private": [], "hidden": []}


def _reap_all() -> None:
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


def _reap(children: dict, free_uids: list[int], send, stale: list) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid not in children:
            continue  # an orphan handed to us as subreaper
        uid, group = children.pop(pid)
        # Student processes left in the worker's group die with it.
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        if uid is not None:
            free_uids.append(uid)
        end = group.oom_end() if group is not None else None
        if group is not None:
            stale.append(group)  # removed (its processes killed) once they are reaped
        send(messages.exited(pid, code=os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                             signal=os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                             memory=end == "own_limit", lost=end == "elsewhere"))


if __name__ == "__main__":
    main()
    # Done: its workers are killed and reaped, its cgroups removed. Skip the interpreter's
    # teardown (with torch and torch._dynamo loaded, ~0.7 s), which the grader's `close()`
    # would otherwise wait for at the end of every run.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
