"""How far workers are contained on this machine, and the command that starts the zygote there.

Three layers, each used when the machine allows it:

1. **Filesystem and network view** (bubblewrap): the zygote, and every worker it forks, sees a
   read-only allowlist (system libraries, the Python installation, and of torchgrade only
   `grader/__init__.py`, `grader/worker/` and `grader/probes/`), a private /tmp and its scratch
   folder. Checks, solutions, tests, other students' submissions and the output folder do not
   exist there. No network: a fresh network namespace with nothing in it.
2. **Per-worker namespaces** (needs CAP_SYS_ADMIN, i.e. root): every worker runs in its own PID,
   mount, IPC and network namespace, as PID 2 under a tiny init, so processes it starts, even
   with `setsid`, die with it; it gets its own /proc, /tmp and /dev/shm.
3. **Privilege drop** (needs root): every worker runs as its own unprivileged uid, taken from a
   range reserved for this zygote, so concurrent workers cannot read each other's scratch
   folders and RLIMIT_NPROC counts only that worker's processes.

`isolation` is "full" with all three, "reduced" with some, "none" with only the rlimits and
process groups every worker has anyway. The zygote verifies layers 2 and 3 with a self-test at
start-up (`zygote.namespaces_work`) rather than trusting this plan.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import site
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import grader

# The only parts of torchgrade a worker may see: none of them holds an answer.
WORKER_PARTS = ("__init__.py", "worker", "probes")
UID_BASE = 61000
UIDS_PER_ZYGOTE = 64
UID_RANGES = 256
LOCK_DIR = Path(tempfile.gettempdir()) / "torchgrade-uid-locks"


@lru_cache(maxsize=1)
def bwrap_works() -> bool:
    """bubblewrap is installed and can build a sandbox here (it cannot in some containers)."""
    path = shutil.which("bwrap")
    if path is None:
        return False
    try:
        proc = subprocess.run([path, "--ro-bind", "/", "/", "--unshare-net", "--", "true"],
                              capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def is_root() -> bool:
    return os.geteuid() == 0


@dataclass
class UidRange:
    """A block of uids reserved for one zygote's workers (a lock file per block, so that
    concurrent graders on one machine never hand the same uid to two live workers)."""

    base: int
    count: int
    _lock: object = field(default=None, repr=False)

    @classmethod
    def reserve(cls) -> "UidRange":
        LOCK_DIR.mkdir(mode=0o700, exist_ok=True)
        for block in range(UID_RANGES):
            handle = open(LOCK_DIR / f"{block}.lock", "w")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                continue
            return cls(UID_BASE + block * UIDS_PER_ZYGOTE, UIDS_PER_ZYGOTE, handle)
        raise RuntimeError("no free uid range for workers (too many graders running)")

    def release(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None


def _python_dirs() -> list[str]:
    """Directories the zygote's Python needs to read: its installation, its venv, and the
    directories on sys.path that are not part of the torchgrade source tree."""
    package_root = Path(grader.__file__).resolve().parent.parent
    prefixes = {Path(p).resolve() for p in (sys.base_prefix, sys.prefix, sys.exec_prefix)}
    prefixes.add(Path(sys.executable).resolve().parent.parent)
    candidates = set(site.getsitepackages()) | {e for e in sys.path if e}
    user_site = site.getusersitepackages()
    if isinstance(user_site, str):
        candidates.add(user_site)
    keep = set(prefixes)
    for entry in candidates:
        p = Path(entry).resolve()
        if not p.is_dir() or any(p == q or q in p.parents for q in prefixes):
            continue  # missing, or already inside a bound prefix
        if p == package_root or package_root in p.parents or p in package_root.parents:
            continue  # the source tree (checks, solutions, tests) or a folder holding it
        keep.add(p)
    return sorted(str(p) for p in keep if p != Path("/"))


def bwrap_prefix(scratch_root: str) -> list[str]:
    """The bubblewrap command line that builds the workers' view (see the module docstring)."""
    package = Path(grader.__file__).resolve().parent
    binds: list[tuple[str, str, str]] = [("--ro-bind", "/usr", "/usr"), ("--ro-bind", "/etc", "/etc")]
    links = []
    for top in ("lib", "lib64", "lib32", "bin", "sbin"):
        path = Path("/") / top
        if path.is_symlink():
            links += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            binds.append(("--ro-bind", str(path), str(path)))
    python_dirs = _python_dirs()
    binds += [("--ro-bind", d, d) for d in python_dirs]
    # An installed torchgrade sits inside a bound site-packages: hide all of it but the worker's
    # parts (an empty folder over checks/, solutions/, ...; an empty file over each module).
    inside = any(Path(d) in package.parents for d in python_dirs)
    for entry in sorted(package.iterdir()):
        if entry.name in WORKER_PARTS:
            binds.append(("--ro-bind", str(entry), str(entry)))
        elif inside and entry.is_dir():
            binds.append(("--tmpfs", str(entry), ""))
        elif inside:
            binds.append(("--ro-bind", "/dev/null", str(entry)))
    binds.append(("--bind", scratch_root, scratch_root))
    # bwrap creates missing parents root-only; workers run as other users and must be able to
    # walk down to what is bound (the Python installation may live under /root).
    parents = sorted({str(p) for *_, dest in binds if dest for p in Path(dest).parents
                      if str(p) != "/"} | {str(Path(d).parent) for k, d, _ in binds
                                           if k == "--tmpfs" and Path(d).parent != Path("/")})
    args = ["bwrap", "--die-with-parent", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--new-session", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"] + links
    for parent in parents:
        args += ["--perms", "0755", "--dir", parent]
    for kind, a, b in binds:
        args += [kind, a] + ([b] if b else [])
    args += ["--ro-bind-try", "/sys/devices/system/cpu", "/sys/devices/system/cpu",
             "--chdir", scratch_root]
    if is_root():
        # The zygote keeps root's capabilities to build each worker's namespaces and drop it
        # to its own uid; the workers themselves lose every capability with that drop.
        args += ["--cap-add", "ALL"]
    return args + ["--"]


def level(*, view: bool, namespaces: bool, uids: bool) -> str:
    if view and namespaces and uids:
        return "full"
    return "reduced" if (view or namespaces or uids) else "none"


def describe_missing(*, view: bool, namespaces: bool, uids: bool) -> str:
    missing = []
    if not view:
        missing.append("filesystem and network isolation (install bubblewrap: apt-get install "
                       "bubblewrap)")
    if not namespaces:
        missing.append("per-worker PID namespaces (run as root)")
    if not uids:
        missing.append("a separate unprivileged user per worker (run as root)")
    return "; ".join(missing)
