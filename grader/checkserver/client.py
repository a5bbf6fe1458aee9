"""`torchgrade check` through this user's check server (`check_warm`), and leaving one behind
after a check that ran in its own process (`leave_server`).

Standard library only, like `address`: a warm check costs this process no more than Python's
start, argparse and a socket.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
from pathlib import Path

from grader.checkserver import address

MAX_REPLY = 64 << 20  # a summary and its warnings; anything longer is not a server of ours


class NoServer(Exception):
    """No server answered this check (none running, another installation's, or it broke off):
    the caller checks in its own process, and leaves a server for the next check if `leave`
    (not when a running server sent this check back to be run in its own process)."""

    def __init__(self, reason: str, *, leave: bool = True):
        super().__init__(reason)
        self.leave = leave


def check_warm(argv: list[str], *, course_root: Path, color: bool) -> int:
    """Run `torchgrade check` with `argv` (the words after `torchgrade`) in this user's server
    of `course_root`: print what it printed, return its exit code. `color`: whether the summary
    is coloured (decided here, where the terminal is). Raises NoServer when no server answered
    before the check began."""
    folder = address.runtime_dir()
    if folder is None:
        raise NoServer("no private folder for a server")
    path = folder / (address.server_name(course_root) + ".sock")
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(str(path))
    except OSError as exc:
        raise NoServer(f"no server listens ({exc.strerror})") from None
    with conn:
        if peer_uid(conn) != os.geteuid():
            raise NoServer("the socket is not this user's server")
        # Stamped only now: a cold check (no server) does not pay for it.
        try:
            cwd = os.getcwd()
        except OSError as exc:  # a folder deleted under this shell: the cold check says so
            raise NoServer(f"no working folder ({exc.strerror})", leave=False) from None
        umask = os.umask(0o022)
        os.umask(umask)
        request = {"key": address.version_key(course_root), "argv": argv, "cwd": cwd,
                   "color": color, "umask": umask}
        try:
            conn.sendall(json.dumps(request).encode() + b"\n")
            reply = json.loads(_read_all(conn))
        except (OSError, ValueError) as exc:
            raise NoServer(f"the server broke off ({exc})") from None
    if isinstance(reply, dict) and reply.get("status") == "cold":
        # The server is fine, but this check must run in its own process (its folder is one
        # the server's workers could see: the cold check's self-test proves and says so).
        raise NoServer("sent back to be checked in its own process", leave=False)
    if not isinstance(reply, dict) or reply.get("status") != "done":
        raise NoServer(str(reply.get("status") if isinstance(reply, dict) else "malformed"))
    sys.stdout.write(str(reply.get("stdout", "")))
    sys.stderr.write(str(reply.get("stderr", "")))
    code = reply.get("code")
    return code if isinstance(code, int) else 1


def leave_server(course_root: Path) -> None:
    """Start this user's server of `course_root` in the background (a new session, its output
    in `<folder>/<name>.log`), for the next check, and say so in one line on stderr; it exits
    at once if one is already up. Never raises: without a server, the next check runs in its
    own process as this one did."""
    folder = address.runtime_dir()
    if folder is None or not (course_root / "course.toml").is_file():
        return
    name = address.server_name(course_root)
    # The server runs in its folder: a relative DIR_ENV must name the same folder there.
    env = {**os.environ, address.DIR_ENV: str(folder)} if address.DIR_ENV in os.environ \
        else None
    try:
        with open(folder / f"{name}.log", "ab") as log:
            subprocess.Popen([sys.executable, "-m", "grader.checkserver.server",
                              str(course_root)],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=folder,
                             env=env, start_new_session=True, close_fds=True)
    except OSError:
        return
    print(f"torchgrade: a check server stays up for your next checks (faster; it exits after "
          f"{address.describe_idle()}; --no-server: none)", file=sys.stderr)


def peer_uid(conn: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket (SO_PEERCRED)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def _read_all(conn: socket.socket) -> bytes:
    chunks, size = [], 0
    while chunk := conn.recv(1 << 16):
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_REPLY:
            raise ValueError("reply too long")
    if not chunks:
        raise ValueError("no reply")
    return b"".join(chunks)
