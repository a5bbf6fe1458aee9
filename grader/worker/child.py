"""The worker's side of the boundary: runs in a process forked by the zygote, next to student code.

`serve` answers requests over a private socket until the grader closes it:

- `load`:  build the student's module from source chunks (a .py is one chunk, a notebook one chunk
           per code cell); a notebook cell that raises is recorded and the next cell still runs.
- `call`:  call a module-level name with decoded arguments and return the result.
- `probe`: run a function from `grader.probes` (instrumentation that holds no answers) on the
           student's module and return its plain records. Probes are resolved, and the worker's
           own code sealed, before the student's module loads (`seal.py`).

Requests and replies are declared in `messages` (replies are built through it). Everything this
process sends is untrusted by the grader; nothing here decides a verdict.
"""

from __future__ import annotations

import __future__
import ctypes
import faulthandler
import functools
import linecache
import operator
import os
import signal
import socket
import sys
import threading
import time
import traceback
import types
import typing
from collections.abc import Callable

from grader.worker import messages, seal, syscalls, wire
from grader.worker import no_backward
from grader.worker.forbidden_ops import forbidden_ops
from grader.worker.limits import WorkerLimits, apply_limits, die_with_parent, exit_now

FUTURE_FLAGS = functools.reduce(operator.or_, (getattr(__future__, name).compiler_flag
                                               for name in __future__.all_feature_names))
MESSAGE_LIMIT = 2000
TRACEBACK_LIMIT = 4000
_student_files: set[str] = set()


class Trusted(typing.NamedTuple):
    """The interpreter's tracing functions as they were before any student code ran: a probe
    that watches student code uses these, not what the student's module may have put in their
    place (`sys.settrace = lambda *a: None` at import time). A tuple, and `seal` freezes its
    class: nothing can be swapped in it afterwards."""

    settrace: Callable
    setprofile: Callable
    gettrace: Callable
    current_frames: Callable
    thread_settrace: Callable
    thread_gettrace: Callable
    get_ident: Callable
    thread_cpu: Callable[[int], float | None]
    children: Callable[[], tuple[frozenset[int], float, int, dict[int, int]]]


def _thread_cpu(ident: int, clock_id=time.pthread_getcpuclockid,
                clock=time.clock_gettime) -> float | None:
    """CPU seconds thread `ident` (a `threading.get_ident()`) has used; None once it ended."""
    try:
        return clock(clock_id(ident))
    except (OSError, ValueError, OverflowError):
        return None


_forks = [0]  # os.fork()s this process has made (a hook os.fork runs; none can remove it)
os.register_at_fork(after_in_parent=lambda: _forks.__setitem__(0, _forks[0] + 1))


def _children(listdir=os.listdir, read=os.read, open_=os.open, close=os.close,
              times=os.times, forks=_forks, getpid=os.getpid, getppid=os.getppid,
              sysconf=os.sysconf
              ) -> tuple[frozenset[int], float, int, dict[int, int]]:
    """This process's child processes (running or not yet waited for), the CPU seconds of
    those already waited for (in clock ticks), how many times it has forked, and the CPU
    nanoseconds so far of every other process it made that still runs (pid -> ns).

    The last reaches the processes it made that are no longer its children: in its own PID
    namespace (the worker is pid 2 there, its init pid 1, which adopts every orphan), all the
    processes of the namespace but these two; elsewhere, its descendants."""

    def read_text(path: str) -> str | None:
        try:
            fd = open_(path, os.O_RDONLY)
        except OSError:
            return None
        try:
            return read(fd, 1 << 16).decode("ascii", "replace")
        except OSError:
            return None
        finally:
            close(fd)

    def tasks_of(pid: int | str) -> list[str]:
        try:
            return listdir(f"/proc/{pid}/task")
        except OSError:
            return []

    def children_of(pid: int | str) -> set[int]:
        found: set[int] = set()
        for task in tasks_of(pid):
            text = read_text(f"/proc/{pid}/task/{task}/children")
            found.update(int(p) for p in (text or "").split() if p.isdigit())
        return found

    def cpu_ns(pid: int) -> int | None:
        total, any_read = 0, False
        for task in tasks_of(pid):
            ran = (read_text(f"/proc/{pid}/task/{task}/schedstat") or "").split()
            if ran and ran[0].isdigit():
                total, any_read = total + int(ran[0]), True
                continue
            text = read_text(f"/proc/{pid}/task/{task}/stat")  # no schedstat: clock ticks
            fields = (text or "").rpartition(")")[2].split()
            if len(fields) > 12 and fields[11].isdigit() and fields[12].isdigit():
                ticks = int(fields[11]) + int(fields[12])
                total, any_read = total + ticks * 10**9 // sysconf("SC_CLK_TCK"), True
        return total if any_read else None

    me = getpid()
    pids = frozenset(children_of("self"))
    root = 1 if me == 2 and getppid() == 1 else me
    others: dict[int, int] = {}
    todo, seen = [root], {root}
    while todo and len(seen) < 4096:
        for pid in children_of(todo.pop()):
            if pid not in seen:
                seen.add(pid)
                todo.append(pid)
                if pid != me and (cpu := cpu_ns(pid)) is not None:
                    others[pid] = cpu
    used = times()
    return pids, used.children_user + used.children_system, forks[0], others


# Taken when the zygote imports this module, before any student code runs.
TRUSTED = Trusted(settrace=sys.settrace, setprofile=sys.setprofile, gettrace=sys.gettrace,
                  current_frames=sys._current_frames, thread_settrace=threading.settrace,
                  thread_gettrace=threading.gettrace, get_ident=threading.get_ident,
                  thread_cpu=_thread_cpu, children=_children)


def student_files() -> set[str]:
    """The file names student code was compiled under (for probes that watch it run)."""
    return set(_student_files)


def start(sock_fd: int, out_fd: int, scratch: str, limits: dict, uid: int | None = None) -> None:
    """Entry point in the freshly forked child; never returns.

    With `uid`, the child is already in its own PID/mount/IPC/network namespaces (see
    `zygote.spawn_contained`) and confines itself before any student code runs.
    """
    code = 0
    try:
        os.setsid()
        die_with_parent()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.closerange(3, sock_fd)
        os.closerange(sock_fd + 1, 1 << 16)
        if uid is not None:
            confine(scratch, uid)
        os.chdir(scratch)
        os.environ.clear()
        os.environ.update({"HOME": scratch, "TMPDIR": scratch, "PATH": "/usr/bin:/bin",
                           "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
        sys.stdin = open(os.devnull)
        # Line buffering keeps prints and tracebacks in the order they happened. (Both are still
        # the interpreter's TextIOWrapper here; typeshed types them as TextIO.)
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
        sys.stderr.reconfigure(line_buffering=True)  # type: ignore[union-attr]
        apply_limits(WorkerLimits(**limits))
        import torch

        torch.set_num_threads(1)
        no_backward.install()  # before student code: what it keeps of torch's engine is ours
        faulthandler.register(messages.WHERE_SIGNAL, file=sys.stderr, all_threads=True,
                              chain=False)
        syscalls.load()  # no kernel keyrings, no user namespaces (see syscalls.py)
        # Last step before the socket opens: from here on student code may run.
        serve(socket.socket(fileno=sock_fd), seal.seal())
    except BaseException:  # noqa: BLE001 - the worker must exit, whatever happened
        code = 70
    finally:
        exit_now(code)


CLONE_NEWNS, CLONE_NEWPID = 0x00020000, 0x20000000
CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWCGROUP = 0x08000000, 0x40000000, 0x02000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 8, 4096, 1 << 14, 1 << 18
PR_SET_NO_NEW_PRIVS = 38
MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def unshare_namespaces() -> None:
    """New PID, mount, IPC and network namespaces for the caller's next child, and a cgroup
    namespace rooted at the caller's cgroup (joined before): /proc/self/cgroup then shows "/",
    not the grader's folders, which name its pid. A kernel without cgroup namespaces (before
    4.6) still gets the others."""
    flags = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET
    if _libc.unshare(flags | CLONE_NEWCGROUP) != 0:
        _check(_libc.unshare(flags), "unshare")


WORKER_TMPFS_SIZE = "256m"


def _mount_tmpfs(path: str, options: str) -> None:
    data = f"size={WORKER_TMPFS_SIZE},{options}".encode()
    _check(_libc.mount(b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, data),
           f"mount a tmpfs on {path}")


def confine(scratch: str, uid: int) -> None:
    """In a fresh mount namespace, as root: private /proc, /tmp, /dev/shm and scratch folder
    (tmpfs, 256 MB each), then drop to `uid` for good (no capabilities, no gains through
    setuid programs)."""
    _check(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make mounts private")
    _check(_libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None),
           "mount /proc")
    from grader.worker import cgroups

    for hierarchy in cgroups.from_env():  # the zygote's way to the workers' cgroups
        # (not a mount point without bwrap)
        _libc.umount2(hierarchy.bound.encode(), MNT_DETACH)
    # The new /tmp and /dev/shm would hide whatever lives there (say, for a checkout under
    # /tmp, Python itself): hold those folders open and bind them back.
    keep = {}
    for path in sorted({sys.prefix, sys.base_prefix, *sys.path}):
        if path.startswith(("/tmp/", "/dev/shm/")) and os.path.isdir(path):
            keep[path] = os.open(path, os.O_PATH | os.O_DIRECTORY)
    for path in ("/tmp", "/dev/shm"):
        if os.path.isdir(path):
            _mount_tmpfs(path, "mode=1777")
    for path, fd in keep.items():
        if not os.path.isdir(path):  # not already restored with a folder above it
            os.makedirs(path)
            _check(_libc.mount(f"/proc/self/fd/{fd}".encode(), path.encode(), None,
                               MS_BIND | MS_REC, None), f"bind {path} back")
        os.close(fd)
    # The scratch folder becomes the worker's own small tmpfs: whatever it writes costs
    # bounded memory, never the grader's disk, and vanishes with it.
    os.makedirs(scratch, exist_ok=True)
    _mount_tmpfs(scratch, f"mode=0700,uid={uid},gid={uid}")
    try:  # under memory pressure the kernel should kill a worker before the grader
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    os.umask(0o077)
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def serve(sock: socket.socket, sealed: seal.Sealed) -> None:
    table = wire.SegmentTable()
    module: types.ModuleType | None = None
    while True:
        try:
            doc, buffers, fds = wire.recv_frame(sock)
        except EOFError:
            return
        try:
            request = wire.decode(doc, buffers, table, fds)
            op = request.get("op")
            reply: messages.WorkerReply
            try:
                if op == "load":
                    module, reply = load(typing.cast(messages.LoadRequest, request))
                elif op == "call":
                    reply = call(module, typing.cast(messages.CallRequest, request))
                elif op == "probe":
                    reply = probe(module, typing.cast(messages.ProbeRequest, request), sealed)
                elif op == "ping":
                    reply = messages.pong()
                else:
                    reply = messages.failed(messages.problem("protocol", f"unknown op {op!r}"))
            except Exception as exc:  # noqa: BLE001 - our side failed (e.g. a probe import)
                reply = messages.failed(messages.problem(
                    "protocol", f"the worker failed: {type(exc).__name__}: {exc}"))
            try:
                encoded = wire.encode(reply, table)
            except Exception as exc:  # noqa: BLE001 - said as the call's, never a crash
                what = (str(exc) if isinstance(exc, wire.NotPlainData) else
                        "a value nested too deeply to send" if isinstance(exc, RecursionError)
                        else f"a value that could not be sent ({type(exc).__name__})")
                encoded = wire.encode(messages.failed(messages.problem(
                    "not_plain", f"returned {what}")))
        finally:
            for fd in fds:
                if all(seg.fd != fd for seg in table.segments.values()):
                    os.close(fd)
        _flush_output()
        wire.send_frame(sock, encoded)
        # The arrays sent this call stay valid wherever student code kept them; the table
        # only forgets them so that memory is returned once nothing refers to it.
        table.close()


def _flush_output() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001 - student code may have replaced the streams
            pass


def load(request: messages.LoadRequest) -> tuple[types.ModuleType,
                                                  messages.Loaded | messages.Failed]:
    name = request["module"]
    module = types.ModuleType(name)
    chunks = request["chunks"]
    module.__file__ = chunks[0]["filename"] if chunks else f"{name}.py"
    sys.modules[name] = module
    cell_errors = []
    _student_files.update(c["filename"] for c in chunks)
    flags = 0  # `from __future__ import ...` in one notebook cell holds for the later ones
    for chunk in chunks:
        code, filename = chunk["code"], chunk["filename"]
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        try:
            compiled = compile(code, filename, "exec", flags=flags, dont_inherit=True)
            flags |= compiled.co_flags & FUTURE_FLAGS
            exec(compiled, module.__dict__)
        except BaseException as exc:  # noqa: BLE001 - any failure of student code is reported
            error = describe_exception(exc, {c["filename"] for c in chunks})
            error["where"] = chunk["label"]
            if not chunk.get("keep_going"):
                return module, messages.failed(error)
            cell_errors.append(error)
    return module, messages.loaded(public_names(module), cell_errors)


def public_names(module: types.ModuleType) -> dict[str, str]:
    names = {}
    for key, value in list(vars(module).items()):
        if key.startswith("_") or isinstance(value, types.ModuleType):
            continue
        names[key] = "class" if isinstance(value, type) else (
            "function" if callable(value) else "other")
    return names


def call(module: types.ModuleType | None,
         request: messages.CallRequest) -> messages.Returned | messages.Failed:
    if module is None:
        return messages.failed(messages.problem("protocol", "no module loaded"))
    name = request["name"]
    target = getattr(module, name, None)
    if target is None:
        return messages.failed(messages.problem("missing", f"no {name} defined"))
    if not callable(target):
        return messages.failed(messages.problem(
            "not_callable", f"{name} is a {type(target).__name__}, not a function"))
    return _run_as_asked(target, request.get("args", []), request)


def _run_as_asked(fn, args: list, request: messages.CallRequest | messages.ProbeRequest
                  ) -> messages.Returned | messages.Failed:
    """`_run` under the request's switches (`messages.RunSwitches`: backward passes off,
    operators forbidden); refused when the code put its own engine in place of the stand-in."""
    with no_backward.backward_switch(request.get("autograd", True)) as switched, \
            forbidden_ops(request.get("forbid", [])):
        reply = _run(fn, args, request.get("kwargs", {}), _student_files)
    if switched.tampered:
        return messages.failed(messages.problem("protocol", no_backward.TAMPERED))
    return reply


def probe(module: types.ModuleType | None, request: messages.ProbeRequest,
          sealed: seal.Sealed) -> messages.Returned | messages.Failed:
    """Run the probe the request names, as resolved before any student code ran, and refuse
    its record if student code changed the worker's own code before or during it."""
    if module is None:
        return messages.failed(messages.problem("protocol", "no module loaded"))
    fn = sealed.probes.get(request["probe"])
    if fn is None:
        why = seal.broken_probe(request["probe"])
        return messages.failed(messages.problem("protocol", (
            f"the worker failed: cannot import its probe module: {why}" if why
            else f"the worker has no probe {request['probe']!r}")))
    args = [module] + list(request.get("args", []))
    changed = sealed.changed()
    reply = _run_as_asked(fn, args, request)
    changed = changed or sealed.changed()
    if changed:
        return messages.failed(messages.problem("protocol", (
            f"the submission changed the grader's instrumentation in the worker ({changed}): "
            "the record this check needs cannot be trusted")))
    return reply


def _run(fn, args, kwargs, student_files: set[str]) -> messages.Returned | messages.Failed:
    try:
        value = fn(*args, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - including SystemExit and KeyboardInterrupt
        return messages.failed(describe_exception(exc, student_files))
    return messages.returned(value)


def describe_exception(exc: BaseException, student_files: set[str]) -> messages.ErrorReport:
    """Plain description of an exception raised by student code, its own frames only."""
    kind: messages.ErrorKind = "raised"
    if isinstance(exc, SystemExit):
        kind = "exit"
    elif isinstance(exc, MemoryError):
        kind = "memory"
    try:
        message = str(exc)[:MESSAGE_LIMIT]
    except BaseException:  # noqa: BLE001 - a hostile __str__
        message = "<the exception's message could not be read>"
    if isinstance(exc, SystemExit):
        message = f"called sys.exit({exc.code!r})"[:MESSAGE_LIMIT]
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename in student_files]
    line = None
    if isinstance(exc, SyntaxError) and exc.filename in student_files:
        line = exc.lineno
    elif frames:
        line = frames[-1].lineno
    text = "".join(traceback.format_list(frames[-10:]))[-TRACEBACK_LIMIT:]
    mro = [c.__qualname__ for c in type(exc).__mro__]
    return messages.raised(kind, type(exc).__qualname__, mro, message, text, line)
