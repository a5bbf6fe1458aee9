"""A memory limit that counts everything a worker allocates, a process limit and a CPU cap:
cgroups.

RLIMIT_AS counts address space only: what a worker writes into a memfd, a tmpfs (/tmp, /dev/shm)
or a shared mapping lives outside it. A memory cgroup charges all of it to the worker.

Layout. The grader (`ZygoteGroup`, outside the sandbox) makes one folder per zygote under the
cgroup it runs in, in each hierarchy it can write (cgroup v2 with the memory controller; else
the v1 `memory`, `pids` and `cpu` hierarchies; the CPU cap only where the machine gives one),
and binds those folders into the zygote's view. The
zygote (`WorkerGroup`, root inside the sandbox) makes one sub-folder per worker with the limits,
the worker's first process moves itself in before anything else runs (its children inherit
it), and the zygote removes the folder when it reaps that process. The grader removes the
zygote's folder when it closes it, and the folders of graders that died (`sweep`).

Everything here fails soft: a machine without writable cgroups gets `None` and the isolation
level says "memory: address space only".
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import time
from dataclasses import dataclass
from typing import Literal

ENV = "TORCHGRADE_CGROUPS"
PREFIX = "torchgrade-"
PIDS_HEADROOM = 8  # keeper, init, worker and the worker's own threads, besides `processes`
# A worker runs single-threaded (OMP_NUM_THREADS=1, torch.set_num_threads(1)): one core is all
# it needs. The cap is for what it starts: busy processes, each in its own session (an
# autogroup of its own: the scheduler's equal share per session), took 25-50x the CPU of the
# other grading processes' workers and could make an innocent submission's checks time out.
# The same cap holds for all the workers of one zygote together (a grading process grades one
# submission at a time, one call at a time): a submission's earlier exercises' workers live
# until it is done, and each would otherwise have had a core of its own.
WORKER_CPUS = 1
CFS_PERIOD_US = 100_000


@dataclass(frozen=True)
class Hierarchy:
    """One folder of one hierarchy: `version` 1 or 2, the `controllers` it limits."""

    version: int
    controllers: tuple[str, ...]
    path: str
    # The folder bound into the zygote's view that holds `path` ("" for `path` itself): a
    # template's pool folder (see `ZygoteGroup.create`), which each worker unmounts.
    mount: str = ""

    def to_json(self) -> dict:
        doc = {"version": self.version, "controllers": list(self.controllers), "path": self.path}
        return doc | ({"mount": self.mount} if self.mount else {})

    @classmethod
    def from_json(cls, doc: dict) -> Hierarchy:
        return cls(int(doc["version"]), tuple(doc["controllers"]), str(doc["path"]),
                   str(doc.get("mount", "")))

    @property
    def bound(self) -> str:
        """The folder bound into the view for this hierarchy."""
        return self.mount or self.path


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


# ----------------------------------------------------------------------------- grader side


def _own_groups() -> dict[str, str]:
    """Controller (or "" for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    groups = {}
    for line in _read("/proc/self/cgroup").splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            groups[name] = path
    return groups


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(hierarchy root, mount point, fstype, super options) of every cgroup mount."""
    found = []
    for line in _read("/proc/self/mountinfo").splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            found.append((fields[3], fields[4], tail[0], set(tail[2].split(","))))
    return found


def _folder(root: str, mount: str, path: str) -> str | None:
    if root != "/" and not (path == root or path.startswith(root.rstrip("/") + "/")):
        return None  # our cgroup is outside what this mount shows
    rel = path[len(root.rstrip("/")):] if root != "/" else path
    folder = os.path.normpath(mount + "/" + rel.lstrip("/"))
    return folder if os.path.isdir(folder) else None


def available() -> set[str]:
    """The controllers ("memory", "pids", "cpu") some layout here offers (whether writable or
    not)."""
    return {c for option in _options() for h in option for c in h.controllers}


def _options() -> list[list[Hierarchy]]:
    """The layouts to try, best first: cgroup v2 with memory, then the v1 memory and pids
    hierarchies (a v1/v2 hybrid mounts the controllers there)."""
    own = _own_groups()
    v1, options = {}, []
    for root, mount, fstype, options_ in _mounts():
        if fstype == "cgroup2" and "" in own:
            folder = _folder(root, mount, own[""])
            offered = _read(os.path.join(folder, "cgroup.controllers")).split() \
                if folder else []
            if folder and "memory" in offered:
                options.append([Hierarchy(2, ("memory", "pids")
                                          + (("cpu",) if "cpu" in offered else ()), folder)])
        elif fstype == "cgroup":
            for name in ("memory", "pids", "cpu"):
                if name in options_ and name in own:
                    folder = _folder(root, mount, own[name])
                    if folder:
                        v1[name] = folder
    if "memory" in v1:
        options.append([Hierarchy(1, (name,), v1[name]) for name in ("memory", "pids", "cpu")
                        if name in v1])
    return options


def _remove_tree(folder: str, wait: float = 2.0) -> bool:
    """Kill every process in `folder` and below, then remove the folders; False if one stays."""
    try:
        subs = [e.path for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return True
    except OSError:
        return False
    ok = all([_remove_tree(sub, wait) for sub in subs])
    deadline = time.monotonic() + wait
    while True:
        kill_all(folder)
        try:
            os.rmdir(folder)
            return ok
        except FileNotFoundError:
            return ok
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)


def kill_all(folder: str) -> None:
    """SIGKILL every process in the cgroup `folder` (v2: at once, with cgroup.kill)."""
    if os.path.exists(os.path.join(folder, "cgroup.kill")):
        try:
            _write(os.path.join(folder, "cgroup.kill"), "1")
            return
        except OSError:
            pass
    for pid in _read(os.path.join(folder, "cgroup.procs")).split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _owner_tag() -> str:
    """"<pid namespace>-<pid>": a pid means something only in its own namespace, and graders in
    other containers may share these folders."""
    try:
        space = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        space = 0
    return f"{space}-{os.getpid()}"


def sweep(parent: str) -> None:
    """Remove the folders of graders of this pid namespace that are no longer running (killed
    with -9 before they could remove their own)."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    space = _owner_tag().split("-")[0]
    for name in names:
        parts = name[len(PREFIX):].split("-") if name.startswith(PREFIX) else []
        if len(parts) == 3 and parts[0] == space and parts[1].isdigit() \
                and not _alive(int(parts[1])):
            _remove_tree(os.path.join(parent, name), wait=0.2)


class ZygoteGroup:
    """The folders one zygote's workers live under; `create` returns None where cgroups cannot
    be written (not root, a read-only /sys/fs/cgroup, no memory controller)."""

    def __init__(self, hierarchies: list[Hierarchy]):
        self.hierarchies = hierarchies

    @classmethod
    def create(cls, under: ZygoteGroup | None = None,
               cpus: int | None = None) -> ZygoteGroup | None:
        """Folders under the cgroup this process runs in; or, `under` a pool's folders (bound
        once into a template's view: `grader.worker.client.ZygoteTemplate`), sub-folders of
        those, whose hierarchies name the pool's folder as their `mount`. `cpus`: a CPU cap on
        the folder, for all its workers together (where the machine gives a cpu controller)."""
        name = f"{PREFIX}{_owner_tag()}-{secrets.token_hex(4)}"
        options = _options() if under is None else [
            [Hierarchy(h.version, h.controllers, h.path, h.path) for h in under.hierarchies]]
        for option in options:
            made: list[Hierarchy] = []
            for parent in option:
                sweep(parent.path)
                path = os.path.join(parent.path, name)
                controllers = parent.controllers
                try:
                    os.mkdir(path, 0o755)
                    if parent.version == 2:
                        controllers = _enable_v2(parent.path, path, controllers)
                except OSError:
                    _remove_tree(path, wait=0.2)
                    continue
                made.append(Hierarchy(parent.version, controllers, path, parent.mount))
            if any("memory" in h.controllers for h in made):
                if cpus is not None:
                    for h in made:
                        for file, value in _cpu_limits(h, cpus):
                            _write_limit(os.path.join(h.path, file), value)
                return cls(made)
            for h in made:  # v2 without a memory controller to delegate: try the next layout
                _remove_tree(h.path, wait=0.2)
        return None

    @property
    def dirs(self) -> list[str]:
        return [h.path for h in self.hierarchies]

    def launched_env(self) -> str:
        """`env()` for a zygote launched with these very folders bound into its view."""
        return json.dumps([Hierarchy(h.version, h.controllers, h.path).to_json()
                           for h in self.hierarchies])

    def env(self) -> str:
        return json.dumps([h.to_json() for h in self.hierarchies])

    def empty(self) -> None:
        """Kill and remove every worker's folder (the zygote died, or is being replaced)."""
        for h in self.hierarchies:
            try:
                subs = [e.path for e in os.scandir(h.path) if e.is_dir(follow_symlinks=False)]
            except OSError:
                continue
            for sub in subs:
                _remove_tree(sub)

    def remove(self) -> bool:
        return all([_remove_tree(h.path) for h in self.hierarchies])


def _enable_v2(parent: str, path: str, controllers: tuple[str, ...]) -> tuple[str, ...]:
    """Delegate memory and pids to `path`'s children (a v2 folder with processes cannot), and
    cpu where it can be; returns the controllers delegated (OSError without memory and pids)."""
    enabled: tuple[str, ...] = ()
    for wanted in ({"memory", "pids"}, {"cpu"} & set(controllers)):
        if not wanted:
            continue
        try:
            have = set(_read(os.path.join(parent, "cgroup.subtree_control")).split())
            if not wanted <= have:
                _write(os.path.join(parent, "cgroup.subtree_control"),
                       " ".join(f"+{c}" for c in sorted(wanted - have)))
            _write(os.path.join(path, "cgroup.subtree_control"),
                   " ".join(f"+{c}" for c in sorted(wanted)))
        except OSError:
            if "memory" in wanted:
                raise
            continue  # no CPU cap: a layer on top, never a reason to lose the memory limit
        enabled += tuple(sorted(wanted))
    return enabled


# ----------------------------------------------------------------------------- zygote side


def from_env() -> list[Hierarchy]:
    try:
        return [Hierarchy.from_json(doc) for doc in json.loads(os.environ.get(ENV, "[]"))]
    except (ValueError, KeyError, TypeError):
        return []


class WorkerGroup:
    """One worker's cgroup folders (one per hierarchy), made by the zygote before the fork."""

    def __init__(self, hierarchies: list[Hierarchy], name: str):
        self.folders = [(h, os.path.join(h.path, name)) for h in hierarchies]

    @classmethod
    def create(cls, hierarchies: list[Hierarchy], name: str, memory: int,
               processes: int) -> WorkerGroup:
        """Make the folders and set the limits; OSError if any cannot be (nothing is left)."""
        group = cls(hierarchies, name)
        try:
            for h, folder in group.folders:
                os.mkdir(folder, 0o755)
                for file, value in _limits(h, memory, processes):
                    _write_limit(os.path.join(folder, file), value)
        except OSError:
            group.remove(wait=0.2)
            raise
        return group

    def join(self) -> None:
        """Move the calling process in (its future children follow).

        Called in a fresh fork, which has one thread. On cgroup v1 that thread moves itself:
        "0" written to `tasks`. This skips the kernel's global lock for moving a whole process
        (cgroup.procs). Taking that lock waits for an RCU grace period: 5-25 ms per hierarchy,
        often, against 0.5 ms for the thread (measured here, three v1 hierarchies per worker).
        With more threads, or on v2 (which moves only whole processes), cgroup.procs."""
        try:
            one_thread = len(os.listdir("/proc/self/task")) == 1
        except OSError:  # no /proc to ask: the way that holds for any process
            one_thread = False
        for h, folder in self.folders:
            if h.version == 1 and one_thread:
                _write(os.path.join(folder, "tasks"), "0")
            else:
                _write(os.path.join(folder, "cgroup.procs"), str(os.getpid()))

    def usage(self) -> int:
        for h, folder in self.folders:
            if "memory" in h.controllers:
                text = _read(os.path.join(folder, "memory.usage_in_bytes" if h.version == 1
                                          else "memory.current")).strip()
                return int(text) if text.isdigit() else 0
        return 0

    def oom_end(self) -> OomEnd:
        """Whether the kernel's out-of-memory killer killed a process of this group, and if
        so whether the group had reached its own limit ("own_limit": the worker's doing) or
        not ("elsewhere": the machine or a container above ran out, through another process's
        memory). The kernel counts every OOM kill of a process in the group's `oom_kill`,
        the machine-wide ones too; only the group's own usage says whose memory it was: on
        v2 its `oom` events (its limit reached, an allocation about to fail), on v1 its peak
        usage at the limit or a failed charge."""
        for h, folder in self.folders:
            if "memory" not in h.controllers:
                continue
            if h.version == 1:
                counts = _counts(os.path.join(folder, "memory.oom_control"))
                peak = _number(os.path.join(folder, "memory.max_usage_in_bytes"))
                limit = _number(os.path.join(folder, "memory.limit_in_bytes"))
                failed = _number(os.path.join(folder, "memory.failcnt"))
                own = bool(failed) or (limit > 0 and peak >= limit * OWN_LIMIT_FRACTION)
            else:
                counts = _counts(os.path.join(folder, "memory.events"))
                own = counts.get("oom", 0) > 0
            if counts.get("oom_kill", 0) <= 0:
                return None
            return "own_limit" if own else "elsewhere"
        return None

    def remove(self, wait: float = 2.0) -> bool:
        return all([_remove_tree(folder, wait) for _, folder in self.folders])


OomEnd = Literal["own_limit", "elsewhere"] | None
# A worker whose peak usage came this close to its limit was killed for its own memory (v1
# counts usage in pages charged ahead, so the peak may stop just short of the limit).
OWN_LIMIT_FRACTION = 0.97


def _counts(path: str) -> dict[str, int]:
    """A cgroup file of "key value" lines as numbers (memory.events, memory.oom_control)."""
    out = {}
    for line in _read(path).splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = int(value)
    return out


def _number(path: str) -> int:
    text = _read(path).strip()
    return int(text) if text.isdigit() else 0


def _limits(h: Hierarchy, memory: int, processes: int) -> list[tuple[str, str]]:
    out = []
    if "memory" in h.controllers:
        if h.version == 1:
            # memsw (memory + swap) after the plain limit: it may never be below it.
            out += [("memory.limit_in_bytes", str(memory)),
                    ("memory.memsw.limit_in_bytes?", str(memory))]
        else:
            out += [("memory.max", str(memory)), ("memory.swap.max?", "0"),
                    ("memory.oom.group?", "1")]
    if "pids" in h.controllers:
        out.append(("pids.max", str(processes + PIDS_HEADROOM)))
    return out + _cpu_limits(h, WORKER_CPUS)


def _cpu_limits(h: Hierarchy, cpus: int) -> list[tuple[str, str]]:
    """A cap of `cpus` cores; optional: a kernel without CFS bandwidth control has none."""
    if "cpu" not in h.controllers:
        return []
    quota = str(cpus * CFS_PERIOD_US)
    return ([("cpu.cfs_period_us?", str(CFS_PERIOD_US)), ("cpu.cfs_quota_us?", quota)]
            if h.version == 1 else [("cpu.max?", f"{quota} {CFS_PERIOD_US}")])


def _write_limit(path: str, value: str) -> None:
    """Write a limit; a name ending in "?" is optional (no swap accounting on this kernel)."""
    optional = path.endswith("?")
    path = path.rstrip("?")
    if optional and not os.path.exists(path):
        return
    try:
        _write(path, value)
    except OSError:
        if not optional:
            raise


def describe(kinds: dict[str, int], memory: int | None = None) -> str:
    """"memory: cgroup v1 4 GiB, processes: cgroup v1" or "memory: address space only", from
    controller -> cgroup version of what held."""
    if not kinds.get("memory"):
        return "memory: address space only"
    amount = f" {memory / 2**30:g} GiB" if memory else ""
    text = f"memory: cgroup v{kinds['memory']}{amount}"
    text += f", processes: cgroup v{kinds['pids']}" if kinds.get("pids") else ""
    return text + (f", CPU: {WORKER_CPUS} core, cgroup v{kinds['cpu']}" if kinds.get("cpu")
                   else "")
