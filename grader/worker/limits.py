"""Resource limits of one worker process, set by the worker on itself right after the fork."""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys
from typing import NoReturn

from pydantic import BaseModel, Field

GiB = 1 << 30
MiB = 1 << 20


class WorkerLimits(BaseModel):
    """Limits applied to every worker; `call_timeout` and `load_timeout` are wall-clock deadlines
    enforced by the grader, `memory` (and `processes` again) a cgroup set up by the zygote, the
    rest kernel rlimits set inside the worker."""

    call_timeout: float = Field(5.0, gt=0, description="seconds per call unless a check says "
                                "otherwise")
    load_timeout: float = Field(10.0, gt=0, description="seconds to import the student's module")
    # Budgets over many calls (enforced by the grader, `grader.checking.student`): deadlines
    # alone let code that runs just under them on every call keep one check busy for minutes,
    # and a submission for hours, until the pool gave up on it as a grader failure. The
    # reference solutions take about a second per check and ten per submission.
    check_budget: float = Field(30.0, gt=0, description="seconds all the calls of one check "
                                "may take together (at least twice its call deadline)")
    submission_budget: float = Field(900.0, gt=0, description="seconds all the calls and "
                                     "imports of one submission may take together")
    address_space: int = Field(4 * GiB, ge=GiB,
                               description="RLIMIT_AS in bytes (torch maps ~0.7 GB)")
    # 1.5 GiB: every reference solution and style grades with full marks at 512 MiB (the
    # worker's own pages: torch's, inherited from the zygote, are charged there); two hostile
    # workers at the limit next to the grader still fit a small machine.
    memory: int = Field(3 * GiB // 2, ge=256 * MiB, description="everything the worker's "
                        "processes hold (memory, shared memory, memfds, files in its tmpfs), "
                        "counted by a cgroup where the machine has one")
    cpu_seconds: int = Field(600, ge=1, description="RLIMIT_CPU over the worker's life")
    processes: int = Field(64, ge=1,
                           description="processes/threads the worker may add (RLIMIT_NPROC)")
    file_size: int = Field(64 * MiB, ge=0, description="largest file the worker may write")
    open_files: int = Field(256, ge=16, description="RLIMIT_NOFILE")
    output_bytes: int = Field(64 * 1024, ge=1024,
                              description="captured stdout+stderr kept per check")
    output_total: int = Field(256 * 1024, ge=1024, description="captured output kept per exercise")


def _user_process_count() -> int:
    uid = os.getuid()
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += 1
            except OSError:
                pass
    return count


def apply_limits(limits: WorkerLimits) -> None:
    """Set rlimits on the calling process (called in the forked worker, before student code)."""

    def cap(kind: int, value: int) -> None:
        _, hard = resource.getrlimit(kind)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(kind, (value, value))

    cap(resource.RLIMIT_AS, limits.address_space)
    cap(resource.RLIMIT_CPU, limits.cpu_seconds)
    cap(resource.RLIMIT_FSIZE, limits.file_size)
    cap(resource.RLIMIT_NOFILE, limits.open_files)
    cap(resource.RLIMIT_CORE, 0)
    # A grading process's own memory budget (its soft RLIMIT_DATA) is no worker's: the worker's
    # memory is bounded by the limits above and its cgroup.
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    resource.setrlimit(resource.RLIMIT_DATA, (hard, hard))
    # RLIMIT_NPROC counts every process of the real user (and root ignores it); allow headroom
    # above what this user already runs so the worker itself is never starved.
    cap(resource.RLIMIT_NPROC, _user_process_count() + limits.processes)
    # A write past RLIMIT_FSIZE should fail in student code (OSError), not kill the worker.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


PR_SET_PDEATHSIG = 1


def exit_now(code: int) -> NoReturn:
    """End this forked process at once with `code`, its output flushed: never the
    interpreter's exit (atexit handlers, finalizers, threads joined), which belongs to the
    process it was forked from."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001 - streams a student's code may have replaced
        pass
    os._exit(code)


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent exits."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
