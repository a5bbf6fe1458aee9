"""The grader's side of the boundary: start the zygote, spawn workers, send requests with deadlines.

`Zygote` owns the warm parent process; `Worker` is one forked worker process. A request either
returns the worker's decoded reply or raises `WorkerTimeout` / `WorkerCrashed`; in both cases the
worker is dead afterwards (killed with its whole process group) and must be replaced.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast, overload

import grader
from grader.worker import cgroups, launch, messages, sandbox, seal, view
from grader.worker.limits import WorkerLimits
from grader.worker.zygote import WARM_ENV

if TYPE_CHECKING:
    from grader.worker import wire

# `wire` imports torch (about 2 s): each function here imports it where it needs it, after
# `Zygote._start` has launched the zygote's process, so that a cold `torchgrade check` imports
# torch in the grader while the zygote imports its own, not one after the other. (This module
# runs only in the grader; the worker's modules bind torch at import, see `seal`.)

log = logging.getLogger("torchgrade")
READY_TIMEOUT = 120.0
SIGNAL_NAMES: dict[int, str] = {
    signal.SIGSEGV: "segmentation fault", signal.SIGBUS: "bus error",
    signal.SIGABRT: "aborted", signal.SIGKILL: "killed", signal.SIGXCPU: "CPU time limit",
    signal.SIGFPE: "floating-point exception", signal.SIGILL: "illegal instruction",
    signal.SIGTERM: "terminated", signal.SIGXFSZ: "file size limit",
}


class WorkerError(Exception):
    """The worker could not answer; its process is gone."""


class WorkerTimeout(WorkerError):
    def __init__(self, seconds: float):
        super().__init__(f"timed out after {seconds:g} s")
        self.seconds = seconds


class WorkerCrashed(WorkerError):
    """The worker's process ended; `lost` when something outside the student's code ended it
    (the kernel killed it for memory another process held): its checks are not the student's
    to lose, and their results are not final."""

    def __init__(self, message: str, *, lost: bool = False):
        super().__init__(message)
        self.lost = lost


def machine_oom_kills() -> int | None:
    """How many processes the kernel's out-of-memory killer has killed on this machine since it
    booted (/proc/vmstat's `oom_kill`), or None where it does not say."""
    try:
        with open("/proc/vmstat", encoding="ascii") as f:
            for line in f:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


# What a worker killed for memory not its own is told, for the student (the check is graded
# again by the next run).
LOST_TO_MEMORY = ("the machine ran out of memory and the kernel stopped this check's worker "
                  "while it was within its own limit: not your code's doing. This check was not "
                  "graded; it will be graded again")


class ReplyRefused(WorkerError):
    """The worker's reply was over the grader's budget (`wire.REPLY_LIMITS`); the message
    reads "the reply was too large: <what> (limit <limit>)"."""


class ZygoteError(RuntimeError):
    """The warm parent could not be started (an installation problem, not a student's)."""


class TemplateError(RuntimeError):
    """The pool's zygote template could not fork a zygote (it is gone, or refused)."""


class ForkedProcess:
    """A zygote forked by the template: not this process's child, so it is known by its pidfd
    (opened by the template before it could reap it). Offers what `Zygote` uses of a Popen;
    its exit status is not ours to read (`poll` says 1 once it ended)."""

    def __init__(self, pid: int, pidfd: int):
        self.pid = pid
        self.pidfd = pidfd
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and self.pidfd >= 0 \
                and select.select([self.pidfd], [], [], 0)[0]:
            self.returncode = 1
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and self.pidfd >= 0:
            if not select.select([self.pidfd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(f"zygote {self.pid}", timeout or 0.0)
            self.returncode = 1
        return self.returncode if self.returncode is not None else 1

    def kill(self) -> None:
        if self.pidfd >= 0:
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def close(self) -> None:
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1


TEMPLATE_REPLY_LIMIT = 4096


@dataclass
class TemplateLink:
    """What a grading process needs to have zygotes forked by the pool's template: its request
    socket (multiprocessing passes it to the grading processes as a duplicated descriptor), the
    pool's scratch folder and cgroups, and the template's view (`sandbox.view_binds`)."""

    sock: socket.socket
    scratch_root: str
    cgroup: cgroups.ZygoteGroup | None
    binds: list[tuple[str, str, str]]
    optimizers: bool = True  # the template forks zygotes with torch._dynamo (its trainer)

    def usable(self) -> bool:
        return self.sock.fileno() >= 0

    def holds(self, scratch_root: str, cgroup: cgroups.ZygoteGroup | None) -> bool:
        """`scratch_root` and `cgroup` (a zygote's) lie in what the template's view binds."""
        if Path(self.scratch_root) not in Path(scratch_root).parents:
            return False
        if cgroup is None:
            return True
        return self.cgroup is not None and all(h.mount in self.cgroup.dirs
                                               for h in cgroup.hierarchies)

    def fork(self, scratch: str, env: dict[str, str], ctrl_fd: int, log_fd: int, *,
             optimizers: bool = True, timeout: float = READY_TIMEOUT) -> ForkedProcess:
        """Have the template fork a zygote on `ctrl_fd` (see `grader.worker.template`), one
        whose workers may build optimizers unless `optimizers` is False; TemplateError if it
        cannot (gone, still importing after `timeout`, or refused)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with ours:
            try:
                request = json.dumps({"op": "fork", "scratch": scratch, "env": env,
                                      "optimizers": optimizers}).encode()
                socket.send_fds(self.sock, [request], [ctrl_fd, log_fd, theirs.fileno()])
            except OSError as exc:
                raise TemplateError(f"the template is gone ({exc})") from None
            finally:
                theirs.close()
            if not select.select([ours], [], [], timeout)[0]:
                raise TemplateError(f"no answer in {timeout:g} s")
            try:
                data, fds, _, _ = socket.recv_fds(ours, TEMPLATE_REPLY_LIMIT, 1)
            except OSError as exc:
                raise TemplateError(f"no answer ({exc})") from None
        try:
            reply = json.loads(data) if data else None
        except ValueError:
            reply = None
        pid = reply.get("pid") if isinstance(reply, dict) else None
        if type(pid) is int and pid > 0 and len(fds) == 1:
            return ForkedProcess(pid, fds[0])
        for fd in fds:
            os.close(fd)
        why = reply.get("error") if isinstance(reply, dict) else None
        raise TemplateError(str(why) if why else "the template is gone" if not data
                            else "a malformed answer")


class ZygoteTemplate:
    """The pool's zygote template (`grader.worker.template`), started by the pool's parent at
    the start of a run, in parallel with everything else: one bubblewrap view, one import of
    torch; each grading process's `Zygote(template=link())` is forked from it.

    `start` returns None where a template would not hold what a launched zygote holds: it needs
    bubblewrap and root (a forked zygote's own mount namespace, with its own /tmp and /dev/shm,
    needs CAP_SYS_ADMIN). The template dies with the process that started it (bwrap
    --die-with-parent; PR_SET_PDEATHSIG in it); `close` ends it and removes the pool's scratch
    folder and cgroups (the zygotes' must be closed first)."""

    def __init__(self, python: str = sys.executable, optimizers: bool = True):
        self.scratch_root = tempfile.mkdtemp(prefix="torchgrade-pool-")
        os.chmod(self.scratch_root, 0o711)  # workers pass through, never list it
        self.cgroup = cgroups.ZygoteGroup.create()
        self._log = tempfile.TemporaryFile()
        try:
            dirs = self.cgroup.dirs if self.cgroup is not None else []
            self.binds = sandbox.view_binds(self.scratch_root, dirs)
            theirs, self.sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            env = _worker_env(self.scratch_root)
            self.optimizers = optimizers
            if not optimizers:
                env[WARM_ENV] = "0"
            with theirs:
                self.process = launch.popen(
                    sandbox.bwrap_prefix(self.scratch_root, dirs)
                    + [python, "-m", "grader.worker.template", str(theirs.fileno())],
                    pass_fds=[theirs.fileno()], env=env,
                    stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
                    cwd=self.scratch_root, start_new_session=True)
        except BaseException:
            self._cleanup()
            raise

    @classmethod
    def start(cls, python: str = sys.executable, optimizers: bool = True
              ) -> ZygoteTemplate | None:
        """A template where this machine allows one (see the class), else None."""
        if not (sandbox.is_root() and sandbox.bwrap_works()):
            return None
        try:
            return cls(python, optimizers)
        except OSError as exc:
            log.warning("torchgrade: no zygote template (%s)", exc)
            return None

    def link(self) -> TemplateLink:
        return TemplateLink(self.sock, self.scratch_root, self.cgroup, self.binds,
                            self.optimizers)

    def close(self) -> None:
        """End the template (its forked zygotes live on until their sockets close)."""
        process = getattr(self, "process", None)
        if process is not None:
            # bwrap's group too: a run that ends at once (nothing to grade) may close it while
            # bwrap is still making its child, which has not yet asked to die with it (and
            # would then outlive it, stuck). The template and its zygotes have sessions and
            # groups of their own: this reaches neither.
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except OSError:
                pass
            process.kill()
            process.wait()
        self._cleanup()

    def _cleanup(self) -> None:
        sock = getattr(self, "sock", None)
        if sock is not None:
            sock.close()
        self._log.close()
        if self.cgroup is not None and not self.cgroup.remove():
            log.warning("torchgrade: could not remove the cgroups %s", ", ".join(self.cgroup.dirs))
        shutil.rmtree(self.scratch_root, ignore_errors=True)

    def __enter__(self) -> ZygoteTemplate:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def copy_course_probes(course: Path, into: Path) -> Path | None:
    """A copy of the course's `probes/*.py` in `into`/course-probes (readable by the zygote, as
    its view shows `into`; a linked file by its content), or None when the course has none."""
    files = sorted(p for p in (course / "probes").glob("*.py") if p.is_file())
    if not files:
        return None
    target = into / "course-probes"
    target.mkdir(mode=0o755)
    for path in files:
        (target / path.name).write_bytes(path.read_bytes())
    return target


def _worker_env(scratch_root: str) -> dict[str, str]:
    """The zygote's whole environment: nothing of the grader's (no PYTHONPATH, PYTHONSTARTUP,
    PYTHONHOME, PYTHONUSERBASE, no PATH entry relative to where the grader was started); the
    package root on PYTHONPATH holds, in the view, only the worker's parts of torchgrade."""
    package_root = str(Path(grader.__file__).resolve().parent.parent)
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": scratch_root,
        "PYTHONPATH": package_root,
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
    }


class Zygote:
    """The warm parent process. Not thread-safe: one per grading thread.

    `isolate=False` skips bubblewrap and the per-worker namespaces (for debugging only);
    `isolation` says what was achieved: "full", "reduced" or "none" (see `sandbox`), `missing`
    what kept it below "full", `memory` how workers' memory is counted. `hidden` adds paths
    (say SUBMISSIONS and OUT) to those the start-up self-test proves no worker can see
    (`sandbox.must_not_see`). `optimizers=False` says that no worker will build a torch.optim
    optimizer: the zygote then skips importing torch._dynamo (~1.8 s of its start-up), which a
    worker that does build one imports itself, inside its own deadline. `launched` is called
    once, as soon as the zygote's process has been started (before its start-up is awaited);
    if it raises, the zygote is ended and the exception goes on.
    """

    process: subprocess.Popen[bytes] | ForkedProcess  # launched, or forked by the template

    def __init__(self, *, python: str = sys.executable, scratch_root: str | None = None,
                 isolate: bool = True, hidden=(), optimizers: bool = True,
                 launched: Callable[[], None] | None = None,
                 template: TemplateLink | None = None, course: Path | None = None):
        self.optimizers = optimizers
        self._launched = launched
        # A pool's template: this zygote is forked from it (its scratch folder and cgroups lie
        # under the pool's, which the template's view binds), else launched as ever.
        self._template = template if isolate and template is not None and template.usable() \
            and (template.optimizers or not optimizers) else None
        self.scratch_root = scratch_root or tempfile.mkdtemp(
            prefix="torchgrade-", dir=self._template.scratch_root if self._template else None)
        self._own_root = scratch_root is None
        # Workers run as other users: they may pass through this folder, not list it.
        os.chmod(self.scratch_root, 0o711)
        self.uids = sandbox.UidRange.reserve() if isolate and sandbox.is_root() else None
        self.view = isolate and sandbox.bwrap_works()
        self.hidden = sandbox.must_not_see(hidden)
        # Limits, not isolation: used wherever the machine lets us, even with isolate=False.
        self.cgroup = cgroups.ZygoteGroup.create(
            under=self._template.cgroup if self._template else None,
            cpus=cgroups.WORKER_CPUS) if sandbox.is_root() else None
        if self._template is not None and not self._template.holds(self.scratch_root,
                                                                   self.cgroup):
            self._template = None  # the template's view would not show them
        self.python = python
        # The course whose probes its workers run (`sub.probe`): copied here, where the zygote
        # can read them (its view hides the course's folder), and imported by it before any fork.
        self.probes = copy_course_probes(course or sandbox.environment_course(),
                                         Path(self.scratch_root))
        self._log = tempfile.TemporaryFile()
        self._lock = threading.Lock()
        try:
            self._start()
        except BaseException:
            self._remove_cgroup()
            if self._own_root:  # a `launched` that raised (a course refused) leaves no folder
                shutil.rmtree(self.scratch_root, ignore_errors=True)
            raise
        layers = dict(view=self.view and not self.leaks, namespaces=self.contained,
                      uids=self.contained, memory=self.memory_cgroup is not None)
        self.isolation = sandbox.level(**layers)
        self.missing = sandbox.describe_missing(**layers, leaks=self.leaks)
        self.memory = cgroups.describe(self.cgroups, WorkerLimits().memory)

    def _start(self) -> None:
        """Start the zygote (forked from the template if there is one, else launched) and wait
        for its `Ready`. A template that fails is given up for a launch."""
        if self._template is not None:
            try:
                self._fork()
                self._await_ready()
                return
            except (TemplateError, ZygoteError) as exc:
                log.warning("torchgrade: the zygote template could not serve (%s); launching "
                            "the worker parent instead", exc)
                self._template = None
                self._end_process()
                if self.cgroup is not None:
                    self.cgroup.empty()
        self._launch()
        self._await_ready()

    def _settings_env(self, cgroup_env: str, binds: list) -> dict[str, str]:
        """The zygote's own settings: its uids, its cgroups, its view's spec."""
        env = {}
        if self.probes is not None:
            env[seal.PROBES_ENV] = str(self.probes)
        if self.uids is not None:
            env["TORCHGRADE_UIDS"] = f"{self.uids.base}:{self.uids.count}"
        if self.cgroup is not None:
            env[cgroups.ENV] = cgroup_env
        # What a worker's view holds (`sandbox.view_spec`), None without one: a check server
        # reads it to tell which of a request's folders its workers could see.
        self.view_spec: dict[str, list[str]] | None = None
        if self.view:
            self.view_spec = sandbox.view_spec(binds, self.hidden)
            env[view.ENV] = json.dumps(self.view_spec)
        return env

    def _fork(self) -> None:
        """The zygote, forked by the pool's template (`ZygoteTemplate`)."""
        assert self._template is not None
        env = {"HOME": self.scratch_root}
        env.update(self._settings_env(self.cgroup.env() if self.cgroup else "",
                                      self._template.binds))
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.process = self._template.fork(self.scratch_root, env, theirs.fileno(),
                                               self._log.fileno(), optimizers=self.optimizers)
        except TemplateError:
            ours.close()
            raise
        finally:
            theirs.close()
        self.ctrl = ours

    def _launch(self) -> None:
        """The zygote, launched: `python -m grader.worker.zygote` (in bubblewrap's view)."""
        env = _worker_env(self.scratch_root)
        if not self.optimizers:
            env[WARM_ENV] = "0"
        cgroup_dirs = self.cgroup.dirs if self.cgroup is not None else []
        binds = sandbox.view_binds(self.scratch_root, cgroup_dirs) if self.view else []
        env.update(self._settings_env(self.cgroup.launched_env() if self.cgroup else "", binds))
        prefix = sandbox.bwrap_prefix(self.scratch_root, cgroup_dirs) if self.view else []
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.process = launch.popen(
            prefix + [self.python, "-m", "grader.worker.zygote", str(theirs.fileno())],
            pass_fds=[theirs.fileno()], env=env,
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
            cwd=self.scratch_root, start_new_session=True)
        theirs.close()
        self.ctrl = ours

    def _end_process(self) -> None:
        """Close the control socket and make sure the zygote's process is gone."""
        process = getattr(self, "process", None)
        ctrl = getattr(self, "ctrl", None)
        if ctrl is not None:
            ctrl.close()
        if process is not None:
            process.kill()
            process.wait()
            if isinstance(process, ForkedProcess):
                process.close()

    def _await_ready(self) -> None:
        ours = self.ctrl
        if self._launched is not None:
            launched, self._launched = self._launched, None
            try:
                launched()
            except BaseException:
                ours.close()  # the zygote exits on EOF; killed if it does not at once
                try:
                    self.process.wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
                if isinstance(self.process, ForkedProcess):
                    self.process.close()
                raise
        from grader.worker import wire  # only now: see the comment at the top

        self._reader = wire.FrameReader(wire.REPLY_LIMITS)
        self._exits: dict[int, messages.Exited] = {}
        ready = self._next(lambda m: m["op"] == "ready", READY_TIMEOUT)
        if ready is None:
            raise ZygoteError("the worker parent did not start: " + self._log_tail())
        ready = cast(messages.Ready, ready)  # `_next` returned what `want` asked for
        self.threads = ready["threads"]
        self.contained = ready["contained"]
        self.leaks = list(ready["leaks"])
        kinds = ready["cgroup"]
        self.cgroups: dict[str, int] = {k: v for k, v in (("memory", kinds["memory"]),
                                                          ("pids", kinds["pids"]),
                                                          ("cpu", kinds["cpu"])) if v}
        self.memory_cgroup = self.cgroups.get("memory")

    def _log_tail(self) -> str:
        self._log.seek(0)
        text = self._log.read()[-2000:].decode("utf-8", "replace").strip()
        if text:
            return text
        if isinstance(self.process, ForkedProcess):
            return "it ended" if self.process.poll() is not None else "it is still running"
        return f"exit status {self.process.poll()}"

    def _next(self, want: Callable[[messages.Control], bool],
              timeout: float) -> messages.Control | None:
        """Read control messages until one satisfies `want`; records every exit note. Skips
        what is no control message; ZygoteError for one that breaks its declaration."""
        from grader.worker import wire

        deadline = time.monotonic() + timeout
        while True:
            frame = self._reader.frame()
            if frame is not None:
                try:
                    msg = messages.parse_control(wire.decode(*frame, limits=wire.REPLY_LIMITS))
                except messages.Malformed as exc:
                    raise ZygoteError(f"{exc}: " + self._log_tail()) from None
                if msg is None:
                    continue
                if msg["op"] == "exited":
                    self._exits[msg["pid"]] = msg
                if want(msg):
                    return msg
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            readable, _, _ = select.select([self.ctrl], [], [], remaining)
            if readable:
                try:
                    chunk = self.ctrl.recv(1 << 16)
                except ConnectionError:
                    chunk = b""
                if not chunk:
                    return None
                self._reader.feed(chunk)

    def spawn(self, limits: WorkerLimits) -> Worker:
        with self._lock:
            try:
                return self._spawn(limits)
            except (ZygoteError, OSError):
                if self._alive():
                    raise
            # Only a worker outside PID namespaces can reach its parent; start a new one so
            # that one submission cannot take the rest of the batch down with it.
            log.warning("torchgrade: the worker parent died (%s); restarting it",
                        self._log_tail())
            self.ctrl.close()
            if isinstance(self.process, ForkedProcess):
                self.process.close()
            if self.cgroup is not None:
                self.cgroup.empty()  # whatever the dead parent's workers left
            self._start()  # from the template while it lives, else launched
            return self._spawn(limits)

    def _alive(self, grace: float = 1.0) -> bool:
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            return True
        return False

    def _spawn(self, limits: WorkerLimits) -> Worker:
        from grader.worker import wire

        scratch = tempfile.mkdtemp(prefix="w", dir=self.scratch_root)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        out_r, out_w = os.pipe()
        _widen(out_r)
        try:
            request = wire.encode(messages.spawn(scratch, limits.model_dump()))
            request.fds = [theirs.fileno(), out_w]
            wire.send_frame(self.ctrl, request)
            reply = self._next(lambda m: m["op"] == "spawned", READY_TIMEOUT)
        except OSError:
            reply = None
        finally:
            theirs.close()
            os.close(out_w)
        pid = reply["pid"] if reply is not None and reply["op"] == "spawned" else None
        if pid is None:
            ours.close()
            os.close(out_r)
            why = reply.get("error") if reply else "no answer"
            raise ZygoteError(f"the worker parent could not start a worker ({why}): "
                              + self._log_tail())
        return Worker(self, pid, ours, out_r, scratch, limits)

    def exit_note(self, pid: int, timeout: float = 2.0) -> messages.Exited | None:
        with self._lock:
            if len(self._exits) > 4096:  # notes of workers nobody asked about
                self._exits.clear()
            if pid in self._exits:
                return self._exits.pop(pid)
            try:
                msg = self._next(lambda m: m["op"] == "exited" and m["pid"] == pid, timeout)
            except ZygoteError as exc:  # the worker's death is told without its note
                log.warning("torchgrade: %s", exc)
                return None
            return self._exits.pop(pid, None) if msg else None

    def close(self) -> None:
        try:
            self.ctrl.close()
        finally:
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            if isinstance(self.process, ForkedProcess):
                self.process.close()
            self._log.close()
            self._remove_cgroup()
            if self.uids is not None:
                self.uids.release()
            if self._own_root:
                shutil.rmtree(self.scratch_root, ignore_errors=True)

    def _remove_cgroup(self) -> None:
        if self.cgroup is not None and not self.cgroup.remove():
            log.warning("torchgrade: could not remove the cgroups %s", ", ".join(self.cgroup.dirs))

    def __enter__(self) -> Zygote:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# The grader reads a worker's output at most this often while it waits for a reply: woken
# at every write, it spent as much CPU as a worker that prints in a loop (3 s of a 3 s flood,
# outside the worker's CPU cap). Between reads the worker's writes wait in the pipe, and a
# flood blocks the worker on its own full pipe, in its own time.
DRAIN_INTERVAL = 0.005
WHERE_WAIT = 0.3  # seconds a worker out of time gets to write where it was (messages.WHERE_SIGNAL)
PIPE_BYTES = 1 << 20  # Linux's default ceiling for an unprivileged pipe
READ_BYTES = 1 << 16


def _widen(fd: int) -> None:
    """Let the pipe hold `PIPE_BYTES`, so that honest output rarely waits for a read (with
    `DRAIN_INTERVAL`, up to ~200 MB/s); the kernel's 64 KiB stays if it refuses."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (OSError, AttributeError):
        pass


class OutputBuffer:
    """Bounded capture of a worker's stdout and stderr: the first and last `limit // 2` bytes
    since the last `take()`, with a count of what was dropped in between."""

    def __init__(self, limit: int):
        self.half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            excess = len(self.tail) - self.half
            if excess > 0:
                self.dropped += excess
                del self.tail[:excess]

    def take(self) -> str:
        text = self.head.decode("utf-8", "replace")
        if self.dropped:
            text += f"\n[... {self.dropped} bytes of output omitted ...]\n"
        text += self.tail.decode("utf-8", "replace")
        self.head, self.tail, self.dropped = bytearray(), bytearray(), 0
        return text


class Worker:
    """One worker process, served by `child.serve`."""

    def __init__(self, zygote: Zygote, pid: int, sock: socket.socket, out_fd: int,
                 scratch: str, limits: WorkerLimits):
        self.zygote = zygote
        self.pid = pid
        self.sock = sock
        self.sock.setblocking(False)
        self.out_fd = out_fd
        os.set_blocking(out_fd, False)
        self.scratch = scratch
        self.limits = limits
        self.output = OutputBuffer(limits.output_bytes)
        self._next_drain = 0.0
        self.alive = True
        # (where the worker has no memory cgroup to tell its own usage: a kill by the kernel's
        # OOM killer anywhere on the machine while it ran says its SIGKILL was none of its own)
        self._oom_kills = machine_oom_kills()

    @overload
    def request(self, message: messages.LoadRequest, timeout: float,
                segments: wire.SegmentTable) -> messages.LoadReply: ...

    @overload
    def request(self, message: messages.CallRequest | messages.ProbeRequest
                | messages.PingRequest, timeout: float,
                segments: wire.SegmentTable) -> messages.Reply: ...

    def request(self, message: messages.Request, timeout: float,
                segments: wire.SegmentTable) -> messages.Reply | messages.LoadReply:
        """Send one request and return its reply, decoded and parsed by the parser of that
        request's reply (`messages.parse_reply_to`); the worker dies on any failure.

        Arrays in `segments` travel as shared memory (their descriptors go with the request)
        and results that lie in them come back as views of the grader's own mapping.

        `timeout` covers sending, the call, receiving and decoding the reply: a reply that
        dribbles in or is slow to decode ends in `WorkerTimeout` like a slow call. A reply over
        `wire.REPLY_LIMITS` raises `ReplyRefused`, a malformed one (by the wire format, or by
        the declaration of the reply) `WorkerCrashed`.
        """
        from grader.worker import wire

        if not self.alive:
            raise WorkerCrashed("the worker is no longer running")
        deadline = time.monotonic() + timeout
        try:
            encoded = wire.encode(message, segments, send_fds=True)
            if not wire.send_frame_nonblocking(self.sock, encoded, deadline, self._drain_some):
                self.kill()
                raise WorkerTimeout(timeout)
            reader = wire.FrameReader(wire.REPLY_LIMITS)
            while True:
                frame = reader.frame()
                if frame is not None:
                    self._drain(0)
                    value = wire.decode(*frame, table=segments, limits=wire.REPLY_LIMITS,
                                        deadline=deadline)
                    if time.monotonic() > deadline:
                        raise wire.Overdue("the reply was decoded after the deadline")
                    return messages.parse_reply_to(message, value)
                now = time.monotonic()
                remaining = deadline - now
                if remaining <= 0:
                    self._stop_late()
                    raise WorkerTimeout(timeout)
                watched: list[socket.socket | int] = [self.sock]
                if now >= self._next_drain:
                    watched.append(self.out_fd)
                else:
                    remaining = min(remaining, self._next_drain - now)
                readable, _, _ = select.select(watched, [], [], remaining)
                if self.out_fd in readable:
                    self._drain(0, reads=PIPE_BYTES // READ_BYTES)
                    self._next_drain = time.monotonic() + DRAIN_INTERVAL
                if self.sock in readable:
                    try:
                        data, anc, _, _ = self.sock.recvmsg(1 << 20, socket.CMSG_SPACE(64))
                    except BlockingIOError:
                        continue
                    except ConnectionError:
                        data, anc = b"", []
                    for fd in wire.fds_from(anc):  # a worker never sends descriptors
                        os.close(fd)
                    if not data:
                        raise self._crashed()
                    reader.feed(data)
        except wire.Overdue:
            self.kill()
            raise WorkerTimeout(timeout) from None
        except wire.TooLarge as exc:
            self.kill()
            raise ReplyRefused(f"the reply was too large: {exc}") from None
        except wire.WireError as exc:
            self.kill()
            raise WorkerCrashed(f"{messages.MALFORMED} ({exc})") from None
        except messages.Malformed as exc:
            self.kill()
            raise WorkerCrashed(str(exc)) from None
        except (BrokenPipeError, ConnectionError):
            raise self._crashed() from None

    def _drain(self, _timeout: float, reads: int | None = None) -> None:
        """Read the worker's output until the pipe is empty, or for `reads` reads: a worker
        that writes as fast as we read would otherwise keep one drain going for ever."""
        while reads is None or reads > 0:
            try:
                data = os.read(self.out_fd, READ_BYTES)
            except BlockingIOError:
                return
            except OSError:
                return
            if not data:
                return
            self.output.add(data)
            if reads is not None:
                reads -= 1

    def _stop_late(self) -> None:
        """Kill a worker that ran out of time, once it has written where it was: its stack
        (faulthandler, on messages.WHERE_SIGNAL) lands in its output, read here first."""
        try:
            os.kill(self.pid, messages.WHERE_SIGNAL)
        except (ProcessLookupError, PermissionError):
            pass
        else:
            end = time.monotonic() + WHERE_WAIT
            # The first output, then until the pipe stays quiet for a moment (the stack comes
            # at once) or time is up.
            wait = WHERE_WAIT
            while (left := end - time.monotonic()) > 0:
                readable, _, _ = select.select([self.out_fd], [], [], min(left, wait))
                if not readable:
                    break
                self._drain(0, reads=PIPE_BYTES // READ_BYTES)
                wait = 0.05
        self.kill()

    def _drain_some(self, _timeout: float) -> None:
        self._drain(0, reads=PIPE_BYTES // READ_BYTES)

    def _crashed(self) -> WorkerCrashed:
        """How the worker ended (it closed its socket), as the error its request raises."""
        self.alive = False
        note = self.zygote.exit_note(self.pid)
        self._drain(0)
        self.kill()
        if note is not None and (note.get("lost") or self._killed_for_others(note)):
            return WorkerCrashed(f"the worker process was killed: {LOST_TO_MEMORY}", lost=True)
        return WorkerCrashed(self._death(note))

    def _killed_for_others(self, note: messages.Exited) -> bool:
        """A SIGKILL that no memory cgroup of the worker's explains, while the kernel's OOM
        killer killed some process of the machine: the kernel's choice, not the worker's
        doing (where a cgroup counts the worker's memory, its note says so instead)."""
        if note["signal"] != signal.SIGKILL or note["memory"] or self.zygote.memory_cgroup:
            return False
        now = machine_oom_kills()
        return now is not None and self._oom_kills is not None and now > self._oom_kills

    def _death(self, note: messages.Exited | None) -> str:
        """Describe how the worker ended."""
        if note is None:
            return "the worker process stopped answering"
        if note["signal"]:
            sig = note["signal"]
            name = SIGNAL_NAMES.get(sig, signal.Signals(sig).name
                                    if sig in signal.Signals._value2member_map_
                                    else f"signal {sig}")
            if note["memory"]:
                return (f"the worker process was killed: it went over its memory limit of "
                        f"{self.limits.memory / 2**30:g} GiB (counting everything it holds: "
                        "arrays, shared memory, memfds, files in /tmp)")
            if sig == signal.SIGKILL:
                # (not the kernel's memory choice: a memory cgroup's note or the machine's OOM
                # count would have said so, above)
                return "the worker process was killed (SIGKILL)"
            return f"the worker process crashed ({name}, signal {sig})"
        return (f"the worker process exited with status {note['code']} "
                "(os._exit or a fatal error)")

    def cpu_seconds(self) -> float | None:
        """CPU time the worker has used so far, read by the grader from the kernel's accounts
        (never reported by the worker): see `tree_cpu_seconds`."""
        return tree_cpu_seconds(self.pid) if self.pid and self.alive else None

    def kill(self) -> None:
        if self.pid:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.alive = False

    def close(self) -> str:
        """Stop the worker and return whatever output was not taken yet."""
        if self.alive:
            self.kill()
        self._drain(0)
        text = self.output.take()
        try:
            self.sock.close()
        finally:
            os.close(self.out_fd)
            shutil.rmtree(self.scratch, ignore_errors=True)
        return text


CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def tree_cpu_seconds(root: int) -> float | None:
    """CPU seconds used by process `root` and every live descendant, all threads counted, plus
    what descendants that ended left in the accounts of the processes that waited for them
    (within the worker's PID namespace its init waits for every orphan). None when /proc cannot
    tell (not Linux, or `root` is gone).

    Per process: the larger of the summed `schedstat` run times of its live threads (exact, in
    ns) and its `stat` utime + stime (clock ticks, but counting threads that already ended)."""
    total, todo, seen = 0.0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            tasks = os.listdir(f"/proc/{pid}/task")
        except (OSError, IndexError):
            if pid == root:
                return None
            continue
        # fields[0] is the state (field 3 of proc(5)): utime..cstime are fields 14..17.
        utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
        exact = 0.0
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                    exact += int(f.read().split()[0]) / 1e9
            except (OSError, ValueError, IndexError):
                pass
        todo.extend(children(pid))
        total += max(exact, (utime + stime) / CLOCK_TICKS) + (cutime + cstime) / CLOCK_TICKS
    return total


def children(pid: int) -> list[int]:
    """The pids of the live children of process `pid` (started by any of its threads); [] when
    it is gone. From /proc's `task/*/children`, or a scan of /proc where the kernel lacks them."""
    kids: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                kids.extend(int(c) for c in f.read().split())
        except FileNotFoundError:
            return _children_by_parent().get(pid, [])
        except (OSError, ValueError):
            pass
    return kids


def _children_by_parent() -> dict[int, list[int]]:
    """Every process's children, from a scan of /proc (kernels without `task/*/children`)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(ppid, []).append(int(entry))
    return parents
