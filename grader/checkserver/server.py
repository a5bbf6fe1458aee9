"""A user's check server: `python -m grader.checkserver.server COURSE_ROOT`, started in the
background by `client.leave_server` after a check that ran in its own process.

It keeps what a cold check starts anew: torch and the checks imported, the report's templates,
and the sandbox's worker parent (`Zygote`), which forks a fresh sandboxed worker for every
student module of every check. Each request is `torchgrade check`'s command line, run by
`grader.cli.run` exactly as the command would (its stdout, stderr and exit code sent back).

Protocol, on the Unix socket `<runtime dir>/<name>.sock` (mode 0600 in a 0700 folder), one
request per connection: the client sends one JSON line {"key", "argv", "cwd", "color"}; the
server answers one JSON document {"status": "done", "code", "stdout", "stderr"}, or
{"status": "stale"} (another installation's key: the server then exits, the client checks in
its own process and leaves a new server), or {"status": "refused"} (another user, or a request
that is not one). Requests are served one after another. The server exits after the idle time
(`address.idle_seconds`), after `MAX_REQUESTS`, on SIGTERM, or when its key is stale.

Only this server's user is answered (SO_PEERCRED), whatever the folder's mode says.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import logging
import os
import select
import signal
import socket
import sys
import threading
import time
import traceback
from pathlib import Path

from grader.checkserver import address
from grader.checkserver.client import peer_uid
from grader.worker.view import inside

MAX_REQUEST = 1 << 20
REQUEST_READ_S = 5.0    # a client that connects and says nothing is dropped after this
REPLY_SEND_S = 30.0     # a client that stops reading its answer is dropped after this
LOCK_WAIT_S = 20.0      # a stale server still winding down holds the lock this long at most
MAX_REQUESTS = 1000     # then a fresh process: whatever a long-lived grader accumulates goes
SOCKET_LOOK_S = 60.0    # how often an idle server checks that its socket is still there
WATCH_S = 0.2           # how often a running check's client is looked at (gone: interrupted)

log = logging.getLogger("torchgrade")


class _CurrentStderr(logging.StreamHandler):
    """Log records go to whatever `sys.stderr` is when they are emitted: a request's buffer."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def main(argv: list[str]) -> int:
    course_root = Path(argv[0]).resolve()
    folder = address.runtime_dir()
    if folder is None:
        return 0
    name = address.server_name(course_root)
    key = address.version_key(course_root)  # before anything it names is imported
    lock = open(folder / f"{name}.lock", "a+")
    if not _locked(lock):
        return 0  # another server of this course is up
    with contextlib.suppress(OSError):
        os.ftruncate(1, 0)  # the log of this server only (stdout and stderr are the log)
    path = folder / f"{name}.sock"
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a server that died without tidying up
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    os.chmod(path, 0o600)
    bound = path.stat()
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    signal.signal(signal.SIGTERM, _stop)
    # A SIGINT from outside (the terminal's Ctrl-C goes to the client: this is another
    # session) must not end a check half-way; the server sends itself one when the client of
    # the check under way has gone (`_watch`). A handler, not SIG_IGN, which the zygote would
    # inherit.
    signal.signal(signal.SIGINT, _interrupt)
    logging.basicConfig(level=logging.WARNING, format="%(message)s", handlers=[_CurrentStderr()])
    zygote = None
    try:
        zygote = _warm_up(course_root)
        if not (zygote.view and not zygote.leaks):
            # Without a private view a worker could reach this folder and answer in the
            # server's place (or read what it answers): no server then.
            log.warning("torchgrade: no check server: the sandbox has no private filesystem "
                        "view here (%s)", zygote.missing)
            return 0
        # Only now: a check made while this server warms up is refused at once and runs in its
        # own process, as the first did. Waiting here for the warm-up (more than a cold check
        # imports, beside a first check still finishing) took a quick second check 11 s where
        # a cold one took 7.
        listener.listen(16)
        _serve(listener, key, zygote, folder, bound)
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        with contextlib.suppress(OSError):
            now = path.stat()
            if (now.st_ino, now.st_dev) == (bound.st_ino, bound.st_dev):  # still ours
                path.unlink()
        listener.close()
        lock.close()  # the next server may start now
        if zygote is not None:
            zygote.close()
    return 0


def _locked(lock) -> bool:
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)


# Whether a request is being served: a SIGTERM then waits for its answer (raised in the
# middle of a check, SystemExit would be taken by pytest as that check's failure). "gone":
# the client of the check under way closed its connection (interrupted).
_serving = {"now": False, "stop": False, "gone": False}


def _interrupt(signum, frame):
    if _serving["now"] and _serving["gone"]:
        raise KeyboardInterrupt  # as Ctrl-C would end a check in its own process


def _watch(conn: socket.socket, done: threading.Event, checking: int) -> None:
    """While a check runs (in the thread `checking`): if its client closes the connection (its
    student pressed Ctrl-C), interrupt the check as Ctrl-C interrupts one in its own process
    (no report is written)."""
    while not done.wait(WATCH_S):
        try:
            readable, _, _ = select.select([conn], [], [], 0)
            if readable and conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                _serving["gone"] = True
                signal.pthread_kill(checking, signal.SIGINT)
                return
            if readable:
                return  # bytes after the request: not a client of ours; nothing to watch
        except (OSError, ValueError):
            return


def _stop(signum, frame):
    if _serving["now"]:
        _serving["stop"] = True
        return
    raise SystemExit(0)


def _warm_up(course_root: Path):
    """Import what a check needs (torch, pytest, the course's checks, the report, matplotlib
    for its pictures), collect every check once, and start the worker parent; returns it."""
    import importlib

    from grader.commands.common import sandbox
    from grader.course.folder import default_root, load_course, use_course
    from grader.course.location import ENV

    course = load_course(course_root)
    use_course(course)
    if course_root != default_root():
        os.environ[ENV] = str(course_root)  # as `--course`: the zygote hides this folder too
    zygote = sandbox(optimizers=True)
    for module in ("grader.running.runner", "grader.outputs.plots", "matplotlib.figure",
                   "matplotlib.backends.backend_svg", "matplotlib.patches"):
        importlib.import_module(module)
    from grader.checking.selection import collect_checks
    from grader.commands.check import warm_report

    warm_report()

    try:  # every check module imported, and pytest's session machinery warm
        collect_checks(list(course.exercises), checks_dir=course.checks_dir)
    except Exception:  # noqa: BLE001 - the request that needs it reports it
        log.warning("torchgrade: the course's checks did not collect:\n%s",
                    traceback.format_exc())
    return zygote


def _serve(listener: socket.socket, key: str, zygote, home: Path, bound: os.stat_result
            ) -> None:
    proven: set[tuple[str, ...]] = set()
    idle_until = time.monotonic() + address.idle_seconds()
    for _ in range(MAX_REQUESTS):
        ready, _, _ = select.select([listener], [], [], min(SOCKET_LOOK_S, max(
            idle_until - time.monotonic(), 0.0)))
        if not ready:
            if time.monotonic() >= idle_until or not _still_ours(listener, bound):
                return  # idle long enough, or its socket was removed or replaced
            continue
        conn, _ = listener.accept()
        _serving["now"] = True
        try:
            if not _answer(conn, key, zygote, home, proven):
                return
        finally:
            _serving["now"] = False
        if _serving["stop"]:
            return
        idle_until = time.monotonic() + address.idle_seconds()


def _still_ours(listener: socket.socket, bound: os.stat_result) -> bool:
    """Whether the socket file this server bound is still at its path (a servers' folder
    emptied by hand leaves the server unreachable: it goes, rather than idle for nothing)."""
    try:
        now = os.stat(listener.getsockname())
    except OSError:
        return False
    return (now.st_ino, now.st_dev) == (bound.st_ino, bound.st_dev)


def _answer(conn: socket.socket, key: str, zygote, home: Path,
            proven: set[tuple[str, ...]]) -> bool:
    """Answer one connection; False when this server must exit (its key is stale)."""
    with conn:
        request = _read_request(conn)  # read first: a refused client hears why
        if peer_uid(conn) != os.geteuid():
            _reply(conn, {"status": "refused", "why": "not this server's user"})
            return True
        if request is None:
            _reply(conn, {"status": "refused", "why": "not a check request"})
            return True
        if request["key"] != key:
            _reply(conn, {"status": "stale"})
            return False
        try:
            os.chdir(request["cwd"])
        except OSError:
            _reply(conn, {"status": "refused", "why": "cannot enter the folder"})
            return True
        umask = os.umask(request["umask"])  # the client's, for the files it writes
        try:
            if seen_by_workers(zygote.view_spec, request["argv"]):
                # The cold check's self-test would find these in a worker's view and say
                # so (isolation reduced): it runs in the client's own process instead.
                _reply(conn, {"status": "cold"})
            else:
                done = threading.Event()
                threading.Thread(target=_watch, args=(conn, done, threading.get_ident()),
                                 daemon=True).start()
                try:
                    answer = _check(request, zygote, proven)
                finally:
                    done.set()
                _reply(conn, answer)
        finally:
            os.umask(umask)
            os.chdir(home)
    # An interrupted check may have left its worker parent mid-conversation: the server goes,
    # and the next check starts afresh (cold, leaving a new server).
    return not _serving["gone"]


def seen_by_workers(spec: dict | None, argv: list[str]) -> list[str]:
    """The paths of a request that a worker of the server's zygote could see, by its view's
    allowlist (`sandbox.view_spec`): the working folder and every existing path on the command
    line, as a cold check's `sandbox.must_not_see` lists them for its self-test. Run in the
    request's working folder. Everything, without a view."""
    if spec is None:
        return ["/"]
    allowed, masks = spec["allowed"], spec["masks"]
    paths = {os.getcwd()}
    for arg in argv:
        paths |= {part for part in (arg, arg.partition("=")[2]) if part and os.path.exists(part)}
    seen = set()
    for raw in paths:
        for path in {os.path.abspath(raw), os.path.realpath(raw)}:
            if inside(path, allowed) and not inside(path, masks):
                seen.add(path)
    return sorted(seen)


def _read_request(conn: socket.socket) -> dict | None:
    conn.settimeout(REQUEST_READ_S)
    data = b""
    try:
        while not data.endswith(b"\n"):
            chunk = conn.recv(1 << 16)
            if not chunk:
                break
            data += chunk
            if len(data) > MAX_REQUEST:
                return None
        request = json.loads(data)
    except (OSError, ValueError):
        return None
    if isinstance(request, dict):
        request.setdefault("umask", 0o022)
    if not (isinstance(request, dict) and isinstance(request.get("key"), str)
            and isinstance(request.get("umask"), int) and 0 <= request["umask"] <= 0o777
            and isinstance(request.get("cwd"), str) and isinstance(request.get("color"), bool)
            and isinstance(request.get("argv"), list)
            and all(isinstance(word, str) for word in request["argv"])):
        return None
    return request


def _check(request: dict, zygote, proven: set[tuple[str, ...]]) -> dict:
    """Run the request's `torchgrade check` here, as the command would run it."""
    from grader import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            args = cli.build_parser().parse_args(request["argv"])
        except SystemExit as exc:  # the client parsed the same words: not expected
            return {"status": "done", "code": exc.code if isinstance(exc.code, int) else 2,
                    "stdout": out.getvalue(), "stderr": err.getvalue()}
        if args.command != "check":
            return {"status": "refused", "why": "only `check` is served"}
        args.color = "always" if request["color"] else "never"
        args.zygote = zygote

        def prove() -> None:
            # The course's files cannot change under a server (its key stamps them), so each
            # choice of exercises is proved once.
            chosen = tuple(args.exercises or ())
            if chosen not in proven:
                cli.check_course_files(args)
                proven.add(chosen)

        try:
            code = cli.run(args, prove=prove)
        except Exception:  # noqa: BLE001 - as the command would: the traceback, exit 1
            traceback.print_exc()
            code = 1
    return {"status": "done", "code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


def _reply(conn: socket.socket, reply: dict) -> None:
    """Send `reply`; a client that stopped reading (suspended, or gone) is given up on after
    REPLY_SEND_S, so that it cannot hold up every later check."""
    with contextlib.suppress(OSError):
        conn.settimeout(REPLY_SEND_S)
        conn.sendall(json.dumps(reply).encode())


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip the teardown of torch's modules
