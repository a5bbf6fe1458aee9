"""Starting a process that dies with this one, from whichever thread asks.

Our sandboxes ask the kernel to kill them when their parent goes (bubblewrap's
--die-with-parent, `limits.die_with_parent`: PR_SET_PDEATHSIG). The kernel counts the *thread*
that started the process as its parent (prctl(2)): a process started from a short-lived thread
(a zygote started while pytest collects, a request's thread) is killed the moment that thread
ends, however long this process lives. So every such process is started here, from one thread
that lasts as long as this process does.
"""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from typing import Any

_launcher: tuple[int, ThreadPoolExecutor] | None = None


def popen(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """`subprocess.Popen(args, **kwargs)`, started from this process's lasting launcher thread
    (its exceptions raised here, in the caller's thread)."""
    global _launcher
    # A forked child inherits the executor but not its thread: it makes its own.
    if _launcher is None or _launcher[0] != os.getpid():
        _launcher = (os.getpid(), ThreadPoolExecutor(max_workers=1,
                                                     thread_name_prefix="torchgrade-launcher"))

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(args, **kwargs)

    return _launcher[1].submit(start).result()
