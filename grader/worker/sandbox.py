"""How far workers are contained on this machine, and the command that starts the zygote there.

Three layers, each used when the machine allows it:

1. **Filesystem and network view** (bubblewrap): the zygote, and every worker it forks, sees a
   read-only allowlist (`view_binds`: /usr, /etc, the parts of each Python prefix the
   interpreter needs, its site-packages, and of torchgrade only `grader/__init__.py`,
   `grader/worker/` and `grader/probes/`), a private /tmp and its scratch folder; never the
   grader's current folder, sys.path entries or PYTHONPATH. Checks, solutions, tests, other
   students' submissions and the output folder do not exist there, and the zygote's self-test
   proves it in a worker (`view_spec`, `must_not_see`, `grader.worker.view`). No network: a
   fresh network namespace with nothing in it.
2. **Per-worker namespaces** (needs CAP_SYS_ADMIN, i.e. root): every worker runs in its own PID,
   mount, IPC and network namespace, as PID 2 under a tiny init, so processes it starts, even
   with `setsid`, die with it; it gets its own /proc, /tmp and /dev/shm.
3. **Privilege drop** (needs root): every worker runs as its own unprivileged uid, taken from a
   range reserved for this zygote, so concurrent workers cannot read each other's scratch
   folders and RLIMIT_NPROC counts only that worker's processes.

Besides, a memory and pids cgroup per worker (`cgroups`), where the cgroup the grader runs in is
writable, counts what RLIMIT_AS misses (memfds, tmpfs files, shared mappings).

`isolation` is "full" with all three and the cgroup, "reduced" with some of the three, "none"
with only the rlimits and process groups every worker has anyway. The zygote verifies every
layer with a self-test at start-up (`zygote.namespaces_work`, `zygote.cgroups_work`) rather than
trusting this plan.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import site
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import IO

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
    _lock: IO[str] | None = field(default=None, repr=False)

    @classmethod
    def reserve(cls) -> UidRange:
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


# What a Python prefix holds that the interpreter needs; never the prefix itself, which may be a
# folder that also holds a course (a venv made inside the course folder or the repository).
PREFIX_PARTS = ("bin", "lib", "lib64", "lib32", "include", "share", "pyvenv.cfg")
SYSTEM_DIRS = ("/usr", "/etc")
TMPFS_SIZE = 256 << 20  # the zygote's own /tmp and /dev/shm (each worker gets its own as well)


def _inside(path: Path, folders) -> bool:
    return any(path == f or f in path.parents for f in folders)


def _python_dirs() -> list[str]:
    """What the zygote's Python needs to read, from an allowlist: the parts of each prefix of its
    installation (`PREFIX_PARTS`) and the interpreter's own site-packages. Never the current
    directory, other sys.path entries or PYTHONPATH (a course folder would be visible), never a
    folder holding the torchgrade source tree (its checks and solutions)."""
    package_root = Path(grader.__file__).resolve().parent.parent
    prefixes = {Path(p).resolve() for p in (sys.base_prefix, sys.prefix, sys.exec_prefix)}
    prefixes.add(Path(sys.executable).resolve().parent.parent)
    keep: set[Path] = set()
    for prefix in prefixes:
        if _inside(prefix, [Path(d) for d in SYSTEM_DIRS]):
            continue  # bound whole anyway
        keep |= {prefix / part for part in PREFIX_PARTS if (prefix / part).exists()}
    sites = set(site.getsitepackages())
    user_site = site.getusersitepackages()
    if site.ENABLE_USER_SITE and isinstance(user_site, str):
        sites.add(user_site)
    for entry in sites:
        p = Path(entry).resolve()
        if p.is_dir() and not _inside(p, keep) and not _inside(p, [Path(d) for d in SYSTEM_DIRS]):
            keep.add(p)
    # Installed (pip, not editable), the package sits in a site-packages that must be bound
    # with the folders holding it (`view_binds` masks all of it but the worker's parts); only a
    # source checkout's folders are left out. Leaving out the folders holding the package
    # either way hid a venv's whole site-packages from the zygote (pydantic, torch: it could
    # not start) for every non-editable install, a student release included.
    if package_root in {Path(s).resolve() for s in sites}:
        return sorted(str(p) for p in keep if p != Path("/"))
    return sorted(str(p) for p in keep
                  if p != Path("/") and p != package_root and p not in package_root.parents)


def view_binds(scratch_root: str,
               cgroup_dirs: Sequence[str] = ()) -> list[tuple[str, str, str]]:
    """The workers' view as (kind, source, destination): bwrap's --ro-bind, --bind, --tmpfs
    and --symlink, from the allowlist in the module docstring."""
    package = Path(grader.__file__).resolve().parent
    binds: list[tuple[str, str, str]] = [("--ro-bind", d, d) for d in SYSTEM_DIRS]
    for top in ("lib", "lib64", "lib32", "bin", "sbin"):
        path = Path("/") / top
        if path.is_symlink():
            binds.append(("--symlink", os.readlink(path), str(path)))
        elif path.is_dir():
            binds.append(("--ro-bind", str(path), str(path)))
    python_dirs = _python_dirs()
    for d in python_dirs:
        if Path(d).is_symlink():  # lib64 -> lib in a venv
            binds.append(("--symlink", os.readlink(d), d))
        else:
            binds.append(("--ro-bind", d, d))
    # An installed torchgrade sits inside a bound site-packages: hide all of it but the worker's
    # parts (an empty folder over checks/, solutions/, ...; an empty file over each module).
    inside = _inside(package, [Path(d) for d in python_dirs + list(SYSTEM_DIRS)])
    for entry in sorted(package.iterdir()):
        if entry.name in WORKER_PARTS:
            binds.append(("--ro-bind", str(entry), str(entry)))
        elif inside and entry.is_dir():
            binds.append(("--tmpfs", str(entry), ""))
        elif inside:
            binds.append(("--ro-bind", "/dev/null", str(entry)))
    binds.append(("--bind", scratch_root, scratch_root))
    # The zygote makes each worker's cgroup in these (writable: it is root there).
    binds += [("--bind", d, d) for d in cgroup_dirs]
    return binds


PRIVATE = ("/dev", "/proc", "/tmp", "/dev/shm")  # fresh in every view: nothing of the host's
COURSE_ENV = "TORCHGRADE_COURSE"  # grader.course.folder.ENV (a later stage: not imported here)


def view_spec(binds: list[tuple[str, str, str]], hidden: list[str]) -> dict[str, list[str]]:
    """What the self-test checks in a worker (see `grader.worker.view.leaks`): `allowed` paths
    are bound whole, `masks` are empty stand-ins over parts of an installed torchgrade,
    `private` folders are the sandbox's own, and `hidden` must not exist at all."""
    masks = sorted(dest or src for kind, src, dest in binds
                   if kind == "--tmpfs" or (kind == "--ro-bind" and src == "/dev/null"))
    allowed = sorted({dest for kind, src, dest in binds if dest} - set(masks)
                     | {"/sys/devices/system/cpu"})
    return {"allowed": allowed, "masks": masks, "private": list(PRIVATE), "hidden": hidden}


def shipped_course() -> Path:
    """The shipped curriculum's folder: grader/curriculum installed, else the source checkout's
    root (`grader.course.location.default_root`, a later stage, says the same)."""
    package = Path(grader.__file__).resolve().parent
    return package / "curriculum" if (package / "curriculum").is_dir() else package.parent


def environment_course() -> Path:
    """The course of this process's environment: TORCHGRADE_COURSE's, else the shipped one.
    A caller that knows its course (`grader.course.folder.active_course`) passes it instead."""
    chosen = os.environ.get(COURSE_ENV)
    return Path(chosen).expanduser().resolve() if chosen else shipped_course()


def must_not_see(extra=()) -> list[str]:
    """Paths no worker may see, wherever and however the grader was started: its current
    directory, every existing path on its command line (SUBMISSIONS, OUT, an assignment), the
    torchgrade source tree (checks, solutions, tests), the course folder, PYTHONPATH and
    sys.path entries outside the Python installation, and `extra`. The zygote's self-test
    proves each of them absent from
    a worker's view (`grader.worker.view`)."""
    package = Path(grader.__file__).resolve().parent
    installation = [Path(d) for d in _python_dirs() + list(SYSTEM_DIRS)]
    # The course being graded: the shipped curriculum, and the one `--course DIR` or
    # TORCHGRADE_COURSE chose (its solutions and hidden checks).
    shipped = shipped_course()
    strict = {os.getcwd(), str(shipped), *map(str, extra)}
    strict |= {os.environ[COURSE_ENV]} if os.environ.get(COURSE_ENV) else set()
    # A course's files may be symlinks into what workers are shown (a checks/ folder kept under
    # /usr/share): the targets must stay out of sight too, or the self-test could not see them.
    courses = [shipped]
    courses += [Path(os.environ[COURSE_ENV])] if os.environ.get(COURSE_ENV) else []
    for course in courses:
        strict |= link_targets(course)
    if not _inside(package, installation):
        strict.add(str(package.parent))  # a source checkout: solutions/, tests/, ...
    for arg in sys.argv[1:]:
        strict |= {part for part in (arg, arg.partition("=")[2]) if part and os.path.exists(part)}
    strict |= {e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e}
    found = set()
    for raw in strict | {e for e in sys.path if e}:
        p = Path(os.path.abspath(raw))
        for q in (p, p.resolve()):
            if raw not in strict and _inside(q, installation):
                continue  # the standard library, site-packages
            if q.exists():
                found.add(str(q))
    return sorted(found)


def link_targets(root: Path, limit: int = 20_000) -> set[str]:
    """The resolved targets of the symlinks inside the folder `root` (not followed; at most
    `limit` entries are looked at, the rest of a huge tree is not: a course is small)."""
    targets: set[str] = set()
    seen = 0
    for folder, dirs, files in os.walk(root, followlinks=False):
        # A Python environment or a repository's own folders kept beside the course (the
        # repository's root is the shipped course) hold no course file; their links point into
        # the installation workers are shown (bin/python -> /usr/bin/python3).
        dirs[:] = [d for d in dirs if not d.startswith(".")
                   and not os.path.exists(os.path.join(folder, d, "pyvenv.cfg"))]
        for name in dirs + files:
            seen += 1
            path = os.path.join(folder, name)
            if os.path.islink(path):
                targets.add(os.path.realpath(path))
        if seen > limit:
            break
    return targets


def bwrap_prefix(scratch_root: str, cgroup_dirs: Sequence[str] = ()) -> list[str]:
    """The bubblewrap command line that builds the workers' view (see the module docstring)."""
    binds = view_binds(scratch_root, cgroup_dirs)
    # bwrap creates missing parents root-only; workers run as other users and must be able to
    # walk down to what is bound (the Python installation may live under /root).
    parents = sorted({str(p) for _, _, dest in binds if dest for p in Path(dest).parents
                      if str(p) != "/"} | {str(Path(d).parent) for k, d, _ in binds
                                           if k == "--tmpfs" and Path(d).parent != Path("/")})
    size = ["--size", str(TMPFS_SIZE)]
    args = ["bwrap", "--die-with-parent", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--new-session", "--dev", "/dev", "--proc", "/proc", *size, "--tmpfs", "/tmp",
            *size, "--tmpfs", "/dev/shm"]
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


def level(*, view: bool, namespaces: bool, uids: bool, memory: bool = True) -> str:
    """"full" needs every layer, a view proven private and a memory limit that counts
    everything; "reduced" any of the three containment layers; "none" otherwise."""
    if view and namespaces and uids and memory:
        return "full"
    return "reduced" if (view or namespaces or uids) else "none"


def describe_missing(*, view: bool, namespaces: bool, uids: bool, memory: bool = True,
                     leaks: Sequence[str] = ()) -> str:
    missing = []
    if leaks:
        missing.append("a private filesystem view (a worker could see "
                       + ", ".join(leaks[:3]) + ("" if len(leaks) <= 3 else ", ...") + ")")
    elif not view:
        missing.append("filesystem and network isolation (install bubblewrap: apt-get install "
                       "bubblewrap)")
    if not namespaces:
        missing.append("per-worker PID namespaces (run as root)")
    if not uids:
        missing.append("a separate unprivileged user per worker (run as root)")
    if not memory:
        missing.append("a memory limit that counts shared memory and files in /tmp (memory: "
                       "address space only; needs a writable memory cgroup, run as root)")
    return "; ".join(missing)
