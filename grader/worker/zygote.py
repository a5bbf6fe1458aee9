"""The warm parent: imports torch and numpy once, then forks a worker per request.

Run as `python -m grader.worker.zygote CTRL_FD` by `client.Zygote`, never forked from the grader:
the grader process holds checks and reference values, and a fork would copy them into the
worker. This process imports torch, numpy and `grader.worker` only, runs no tensor operation (a
fork after one can deadlock the child in torch's thread pools) and stays single-threaded.

Control protocol (frames from `wire`), grader -> zygote:
  {"op": "spawn", "scratch": path, "limits": {...}} with fds [worker socket, output pipe]
zygote -> grader:
  {"op": "ready", "pid": n, "threads": n}     once, after the imports
  {"op": "spawned", "pid": n}                 reply to spawn
  {"op": "exited", "pid": n, "code": n | None, "signal": n | None}   whenever a worker ends
The zygote exits, killing its workers, when the control socket closes.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def main() -> None:
    ctrl = socket.socket(fileno=int(sys.argv[1]))
    from grader.worker import child, wire
    from grader.worker.limits import die_with_parent

    die_with_parent()
    import numpy  # noqa: F401 - warm imports shared by every fork
    import torch

    torch.set_num_threads(1)
    # The first optimizer a process builds (or zero_grads) imports torch._dynamo: 2-3 s, with
    # sympy. Imported once here (no tensor operation, no thread), not in every worker's deadline.
    import torch._dynamo  # noqa: F401

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the grader, which closes us
    children: set[int] = set()

    def send(msg: dict) -> None:
        wire.send_frame(ctrl, wire.encode(msg))

    send({"op": "ready", "pid": os.getpid(), "threads": _thread_count()})
    try:
        while True:
            readable, _, _ = select.select([ctrl, wake_r], [], [])
            if wake_r in readable:
                os.read(wake_r, 4096)
                _reap(children, send)
            if ctrl in readable:
                try:
                    doc, buffers, fds = wire.recv_frame(ctrl)
                except (EOFError, ConnectionError):
                    return
                request = wire.decode(doc, buffers)
                if request.get("op") != "spawn" or len(fds) != 2:
                    for fd in fds:
                        os.close(fd)
                    continue
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    for fd in (ctrl.fileno(), wake_r, wake_w):
                        os.close(fd)
                    child.start(fds[0], fds[1], request["scratch"], request["limits"])
                children.add(pid)
                for fd in fds:
                    os.close(fd)
                send({"op": "spawned", "pid": pid})
    finally:
        for pid in children:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass


def _reap(children: set[int], send) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)
        # Student processes left in the worker's group die with it.
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        send({"op": "exited", "pid": pid,
              "code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
              "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None})


if __name__ == "__main__":
    main()
