"""The zygote template: imports what a zygote imports once, then forks a zygote per request.

Run as `python -m grader.worker.template CTRL_FD` by `client.ZygoteTemplate` (the pool's parent,
once per `torchgrade grade` run), inside the same bubblewrap view as a launched zygote. Like the
zygote, it imports torch, numpy, `grader.worker` and `grader.probes` only (`zygote.warm`; its
trainer, below, torch._dynamo too), never a check, a solution or any other part of the grader,
runs no tensor operation and stays single-threaded: each fork is a zygote as if launched, minus
its imports.

Protocol: `CTRL_FD` is a SOCK_SEQPACKET socket whose peer the grading processes share. Each
packet is one request, JSON plus SCM_RIGHTS descriptors:

  {"op": "fork", "scratch": path, "env": {name: value}, "optimizers": bool}
      fds [the zygote's control socket, its log file, a reply socket]

`optimizers` (default true) asks for a zygote whose workers may build torch.optim optimizers:
one with torch._dynamo imported. Unless the template was told that none will (WARM_ENV "0"),
such requests are passed on to the trainer template, which this one forks on the first of them
and which then imports torch._dynamo; the others are forked here with it deferred
(`grader.worker.deferred_dynamo`), without waiting for that import.

`env` may set only the zygote's own settings (`ZYGOTE_ENV`). The reply goes to the reply socket:
{"pid": n} with the zygote's pidfd (opened here, before the zygote can be reaped, so the pid it
names is the zygote's), or {"pid": null, "error": why}. The zygote, in the child:

- starts its own session, writes to the log file, takes `env`;
- as root, gets its own mount namespace with a fresh /tmp and /dev/shm (a launched zygote has
  its own view's; zygotes of one template must not share theirs);
- runs `zygote.run` on its control socket: self-tests, `Ready`, spawn loop, exactly as a
  launched zygote after its imports.

A forked zygote does not die with the template: it lives until its grading process closes its
control socket (as a launched one does), so a template that dies mid-run costs no worker. The
template exits when every peer of `CTRL_FD` is closed, and dies with the pool's parent (bwrap
--die-with-parent, and PR_SET_PDEATHSIG on itself).
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import sys
import traceback
from collections.abc import Sequence

ZYGOTE_ENV = ("HOME", "TORCHGRADE_UIDS", "TORCHGRADE_CGROUPS", "TORCHGRADE_VIEW",
              "TORCHGRADE_PROBES")
MAX_REQUEST = 1 << 18
FDS = 3


def main() -> None:
    ctrl = socket.socket(fileno=int(sys.argv[1]))
    from grader.worker import zygote
    from grader.worker.limits import die_with_parent

    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the grader, which ends us
    optimizers = os.environ.pop(zygote.WARM_ENV, "1") != "0"
    zygote.warm(None)
    # The zygotes whose workers may build an optimizer come from a second template, forked
    # from this one on the first request for one, which then imports torch._dynamo (~1 s):
    # meanwhile this one forks the zygotes of exercises that build none (torch._dynamo
    # deferred in each), and a run's first submission does not wait for that import. A run
    # whose exercises build none never pays for it.
    serve(ctrl, trainer=Trainer(ctrl) if optimizers else None, optimizers=False)


class Trainer:
    """The template of zygotes that may build optimizers, forked on first use
    (`start_trainer`)."""

    def __init__(self, ctrl: socket.socket):
        self._ctrl = ctrl
        self.sock: socket.socket | None = None

    def pass_on(self, data: bytes, fds: list[int], own: list[int]) -> None:
        """Hand a request to the trainer (started if need be: it closes `own`, this template's
        descriptors, and the request's); if it cannot take it, say so on the reply socket (the
        grading process then launches its zygote)."""
        try:
            if self.sock is None:
                self.sock = start_trainer(self._ctrl, close=own + fds)
            socket.send_fds(self.sock, [data], fds)
        except OSError as exc:
            if len(fds) == FDS:
                with socket.socket(fileno=os.dup(fds[2])) as reply:
                    _answer(reply, {"pid": None,
                                    "error": f"the trainer template is gone ({exc})"})

    def fds(self) -> list[int]:
        """Its descriptors in this template (none before it starts)."""
        return [self.sock.fileno()] if self.sock is not None else []


def start_trainer(ctrl: socket.socket, close: list[int]) -> socket.socket:
    """Fork the template of zygotes that may build optimizers: it closes `close` (nothing of
    this template's but its imports goes on), imports torch._dynamo, then forks a zygote per
    request it is passed on the socket returned (until that closes)."""
    from grader.worker import zygote
    from grader.worker.limits import die_with_parent, exit_now

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            ours.close()
            ctrl.close()
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for fd in close:
                os.close(fd)
            die_with_parent()
            zygote.warm_optimizers(True)
            serve(theirs, trainer=None, optimizers=None)
        except BaseException:  # noqa: BLE001 - the process must exit, whatever happened
            code = 70
            traceback.print_exc()
        finally:
            exit_now(code)
    theirs.close()
    return ours


def serve(ctrl: socket.socket, *, trainer: Trainer | None, optimizers: bool | None) -> None:
    """Answer the fork requests of `ctrl` until every peer has closed it: a request for a zygote
    whose workers may build optimizers is passed on to `trainer` when there is one; the others
    are forked here, with torch._dynamo as `optimizers` says (`zygote.warm_optimizers`)."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    while True:
        watched: list[socket.socket | int] = [ctrl, wake_r]
        readable, _, _ = select.select(watched, [], [])
        if wake_r in readable:
            os.read(wake_r, 4096)
        _reap()
        if ctrl not in readable:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(ctrl, MAX_REQUEST, FDS)
        except InterruptedError:
            continue
        if not data:
            return  # every grading process and the pool's parent closed their end
        try:
            own = [wake_r, wake_w] + (trainer.fds() if trainer is not None else [])
            if trainer is not None and trains(data):
                trainer.pass_on(data, fds, own)
            else:
                serve_one(data, fds, close=[ctrl.fileno()] + own, optimizers=optimizers)
        finally:
            for fd in fds:
                os.close(fd)


def trains(data: bytes) -> bool:
    """Whether a request asks for a zygote whose workers may build optimizers (the default)."""
    try:
        request = json.loads(data)
    except ValueError:
        return False  # malformed: refused by `serve_one`
    return not isinstance(request, dict) or request.get("optimizers", True) is not False


def serve_one(data: bytes, fds: list[int], close: list[int],
              optimizers: bool | None = None) -> None:
    """Fork the zygote one request asks for and answer on its reply socket (fds[2])."""
    if len(fds) != FDS:
        return
    reply = socket.socket(fileno=os.dup(fds[2]))
    try:
        try:
            request = parse(data)
        except ValueError as exc:
            _answer(reply, {"pid": None, "error": str(exc)})
            return
        pid = os.fork()
        if pid == 0:
            reply.close()
            _zygote(request, fds[0], fds[1], close + [fds[2]], optimizers)
        pidfd = os.pidfd_open(pid)  # not reaped yet: this pid is the zygote's
        try:
            _answer(reply, {"pid": pid}, [pidfd])
        finally:
            os.close(pidfd)
    finally:
        reply.close()


def parse(data: bytes) -> dict:
    """A fork request, checked; ValueError for anything else."""
    try:
        request = json.loads(data)
    except ValueError:
        raise ValueError("the request is not JSON") from None
    if not (isinstance(request, dict) and request.get("op") == "fork"
            and isinstance(request.get("scratch"), str) and os.path.isabs(request["scratch"])
            and isinstance(request.get("env"), dict)
            and isinstance(request.get("optimizers", True), bool)
            and all(k in ZYGOTE_ENV and isinstance(v, str) for k, v in request["env"].items())):
        raise ValueError("malformed fork request")
    return request


def _answer(reply: socket.socket, doc: dict, fds: Sequence[int] = ()) -> None:
    try:
        socket.send_fds(reply, [json.dumps(doc).encode()], list(fds))
    except OSError:
        pass  # the grading process gave up waiting: its zygote ends on its closed socket


def _zygote(request: dict, ctrl_fd: int, log_fd: int, close: list[int],
            optimizers: bool | None) -> None:
    """In the forked child: become the zygote `request` describes (torch._dynamo as
    `optimizers` says); never returns."""
    from grader.worker.limits import exit_now  # already imported by `main`

    code = 0
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in close:
            os.close(fd)
        os.setsid()
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(log_fd)
        os.environ.update(request["env"])
        if os.geteuid() == 0:
            private_tmp()
        os.chdir(request["scratch"])
        from grader.worker import zygote

        zygote.warm_optimizers(optimizers)
        zygote.run(socket.socket(fileno=ctrl_fd))
    except BaseException:  # noqa: BLE001 - the zygote must exit, whatever happened
        code = 70
        try:
            traceback.print_exc()
        except BaseException:  # noqa: BLE001
            pass
    finally:
        exit_now(code)


def private_tmp() -> None:
    """A mount namespace of this zygote's own, with a fresh /tmp and /dev/shm (as bwrap gives a
    launched zygote: `sandbox.TMPFS_SIZE` each); what the view binds below them (the pool's
    scratch folder) is bound back."""
    from grader.worker import child
    from grader.worker.sandbox import TMPFS_SIZE

    def check(result: int, what: str) -> None:
        child._check(result, what)

    check(child._libc.unshare(child.CLONE_NEWNS), "unshare the mount namespace")
    check(child._libc.mount(b"none", b"/", None, child.MS_REC | child.MS_PRIVATE, None),
          "make mounts private")
    keep: dict[str, int] = {}
    for path in sorted(mounts_below(("/tmp", "/dev/shm"))):
        if not any(path.startswith(k + "/") for k in keep):
            keep[path] = os.open(path, os.O_PATH)
    for path in ("/tmp", "/dev/shm"):
        data = f"size={TMPFS_SIZE},mode=1777".encode()
        check(child._libc.mount(b"tmpfs", path.encode(), b"tmpfs",
                                child.MS_NOSUID | child.MS_NODEV, data), f"mount a tmpfs on {path}")
    for path, fd in keep.items():
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            os.makedirs(path, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "a").close()
        check(child._libc.mount(f"/proc/self/fd/{fd}".encode(), path.encode(), None,
                                child.MS_BIND | child.MS_REC, None), f"bind {path} back")
        os.close(fd)


def mounts_below(folders: tuple[str, ...]) -> list[str]:
    """Mount points strictly inside `folders`, from /proc/self/mountinfo."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if len(fields) < 5:
                continue
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
            if any(point.startswith(folder + "/") for folder in folders):
                found.append(point)
    return found


def _reap() -> None:
    """Reap forked zygotes that ended (their grading processes learn it from their sockets)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


if __name__ == "__main__":
    main()
    from grader.worker.limits import exit_now

    exit_now(0)
