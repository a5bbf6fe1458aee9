"""Every message between the grader and its worker sandbox, declared once.

Two conversations travel as frames of `wire` (each message is one plain dict):

- the zygote's control socket (`client.Zygote` <-> `zygote.main`): `Spawn` from the grader;
  `Ready`, `Spawned` and `Exited` from the zygote;
- a worker's own socket (`client.Worker.request` <-> `child.serve`): `LoadRequest`,
  `CallRequest`, `ProbeRequest` and `PingRequest` from the grader; `Loaded`, `Returned`, `Pong`
  or `Failed` (carrying an `ErrorReport`) from the worker.

Each message is a `TypedDict` (its keys and their order are the wire format) with a function
that builds it, used by the side that sends it. What the grader receives is read through a
parser (`parse_ready`, `parse_spawned`, `parse_exited`, `parse_reply`, `parse_load_reply`) that
checks every field it relies on and raises `Malformed` otherwise: a worker's reply is whatever
a submission written to tamper with the worker makes it, so nothing here trusts its shape. The
texts inside an `ErrorReport` are not checked here: the grader reads each of them through its
own bounds (`grader.checking.student`).

This module runs in the zygote and in every worker, next to student code: it imports the
standard library only (the worker's view holds `grader/worker/`; `seal` hides and freezes it
with the rest of the grader's modules before student code runs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
import signal
from typing import Any, Literal, TypedDict

MALFORMED = "the worker sent a malformed reply"
# grader -> worker, when a call ran out of time: write every thread's Python stack to the output
# (faulthandler, registered before student code), so that "timed out" can say where it was.
WHERE_SIGNAL = signal.SIGUSR2
# Bounds of what a load reply may bring into the grader.
NAMES = 10_000  # public names of a module
CELL_ERRORS = 100  # notebook cells that raised


class Malformed(ValueError):
    """A received message that breaks its declaration; the message says whose."""


# --------------------------------------------------------------------------- zygote control


class Spawn(TypedDict):
    """grader -> zygote: fork a worker. Travels with two descriptors, [the worker's end of its
    socket, the write end of its output pipe]; anything else is ignored."""

    op: Literal["spawn"]
    scratch: str  # the worker's scratch folder (made by the grader): its cwd, HOME and TMPDIR
    limits: dict[str, Any]  # `WorkerLimits.model_dump()`: applied before student code runs


def spawn(scratch: str, limits: dict[str, Any]) -> Spawn:
    return {"op": "spawn", "scratch": scratch, "limits": limits}


def is_spawn(msg: Any) -> bool:
    """`msg` is a `Spawn` (checked by the zygote, which ignores anything else)."""
    return (type(msg) is dict and msg.get("op") == "spawn" and type(msg.get("scratch")) is str
            and type(msg.get("limits")) is dict)


class CgroupKinds(TypedDict):
    """Which cgroup version (1 or 2) limits a worker's memory, processes and CPU; None: none."""

    memory: int | None
    pids: int | None
    cpu: int | None


class Ready(TypedDict):
    """zygote -> grader, once, after its start-up self-tests."""

    op: Literal["ready"]
    pid: int  # the zygote's own pid
    threads: int  # threads it runs (must stay 1: it forks)
    contained: bool  # workers run in their own namespaces as their own uid
    leaks: list[str]  # paths a worker can see but should not (`view.leaks`)
    cgroup: CgroupKinds


def ready(pid: int, threads: int, contained: bool, leaks: list[str], memory: int | None,
          pids: int | None, cpu: int | None) -> Ready:
    return {"op": "ready", "pid": pid, "threads": threads, "contained": contained,
            "leaks": leaks, "cgroup": {"memory": memory, "pids": pids, "cpu": cpu}}


class _SpawnedFields(TypedDict):
    op: Literal["spawned"]
    pid: int | None  # the process whose group the grader kills; None: no worker was started


class Spawned(_SpawnedFields, total=False):
    """zygote -> grader: the answer to a `Spawn`."""

    # (`total=False` rather than typing.NotRequired, which Python 3.10 does not have)
    error: str  # with pid None: why


def spawned(pid: int) -> Spawned:
    return {"op": "spawned", "pid": pid}


def not_spawned(error: str) -> Spawned:
    return {"op": "spawned", "pid": None, "error": error}


class Exited(TypedDict):
    """zygote -> grader, whenever a worker it spawned ends."""

    op: Literal["exited"]
    pid: int  # as in its `Spawned`
    code: int | None  # exit status, if it exited
    signal: int | None  # the signal that killed it, if one did
    memory: bool  # its cgroup killed it for going over its memory limit
    # the kernel killed it for memory while it was under its own limit: another process's
    # memory (the machine or a container above ran out), never the student's doing
    lost: bool


def exited(pid: int, code: int | None, signal: int | None, memory: bool,
           lost: bool = False) -> Exited:
    return {"op": "exited", "pid": pid, "code": code, "signal": signal, "memory": memory,
            "lost": lost}


def _is_int(value: Any) -> bool:
    return type(value) is int


def _is_int_or_none(value: Any) -> bool:
    return value is None or type(value) is int


def _fields(msg: Any, op: str, checks: dict[str, Any]) -> dict:
    """`msg` as a dict whose `op` is `op` and whose fields pass `checks` (key -> predicate);
    Malformed otherwise."""
    if type(msg) is not dict or msg.get("op") != op:
        raise Malformed(f"the worker parent sent a malformed {op!r} message")
    for key, ok in checks.items():
        if not ok(msg.get(key)):
            raise Malformed(f"the worker parent sent a {op!r} message with a malformed {key!r}")
    return msg


def parse_ready(msg: Any) -> Ready:
    _fields(msg, "ready", {
        "pid": _is_int, "threads": _is_int, "contained": lambda v: type(v) is bool,
        "leaks": lambda v: type(v) is list and all(type(p) is str for p in v),
        "cgroup": lambda v: type(v) is dict and set(v) == {"memory", "pids", "cpu"}
        and all(_is_int_or_none(k) for k in v.values())})
    return msg


def parse_spawned(msg: Any) -> Spawned:
    _fields(msg, "spawned", {"pid": _is_int_or_none})
    if msg["pid"] is None and type(msg.get("error")) is not str:
        raise Malformed("the worker parent sent a 'spawned' message with a malformed 'error'")
    return msg


def parse_exited(msg: Any) -> Exited:
    _fields(msg, "exited", {"pid": _is_int, "code": _is_int_or_none,
                            "signal": _is_int_or_none, "memory": lambda v: type(v) is bool,
                            "lost": lambda v: type(v) is bool})
    return msg


Control = Ready | Spawned | Exited  # what the zygote sends

CONTROL_PARSERS: dict[str, Callable[[Any], Control]] = {
    "ready": parse_ready, "spawned": parse_spawned, "exited": parse_exited}


def parse_control(msg: Any) -> Control | None:
    """A message from the zygote, checked by the parser of its `op`; None for anything that
    is not a dict with a known `op` (skipped, as a frame of a newer version would be)."""
    if type(msg) is not dict:
        return None
    op = msg.get("op")
    parse = CONTROL_PARSERS.get(op) if type(op) is str else None  # a list would not hash
    return parse(msg) if parse is not None else None


# --------------------------------------------------------------------------- worker requests


class Chunk(TypedDict):
    """A unit of student code run in order (`grader.models.SourceChunk.model_dump()`)."""

    code: str
    filename: str  # what tracebacks name
    label: str  # what messages name: the file, or "cell 3"
    first_line: int
    keep_going: bool  # a notebook cell that raises does not stop the next ones


class LoadRequest(TypedDict):
    """grader -> worker, first: build the student's module from its chunks."""

    op: Literal["load"]
    module: str  # the module's name (the exercise)
    chunks: list[Chunk]


def load_request(module: str, chunks: list[Chunk]) -> LoadRequest:
    return {"op": "load", "module": module, "chunks": chunks}


class RunSwitches(TypedDict, total=False):
    """How the worker runs a call or a probe (absent: as usual)."""

    autograd: bool  # False: no backward pass can run during it (CheckInfo.autograd)
    forbid: list[str]  # aten operators refused during it (CheckInfo.forbid)


class CallRequest(RunSwitches):
    """grader -> worker: call a module-level name of the student's module."""

    op: Literal["call"]
    name: str
    args: list[Any]  # plain data (arrays in shared segments travel as views of them)
    kwargs: dict[str, Any]


def call_request(name: str, args: list[Any], kwargs: dict[str, Any]) -> CallRequest:
    return {"op": "call", "name": name, "args": args, "kwargs": kwargs}


class ProbeRequest(RunSwitches):
    """grader -> worker: run probe `probe` ("module:function" of `grader.probes`) as
    `function(student_module, *args, **kwargs)`."""

    op: Literal["probe"]
    probe: str
    args: list[Any]
    kwargs: dict[str, Any]


def probe_request(probe: str, args: list[Any], kwargs: dict[str, Any]) -> ProbeRequest:
    return {"op": "probe", "probe": probe, "args": args, "kwargs": kwargs}


class PingRequest(TypedDict):
    """grader -> worker: are you there (answered by `Pong`)."""

    op: Literal["ping"]


def ping_request() -> PingRequest:
    return {"op": "ping"}


Request = LoadRequest | CallRequest | ProbeRequest | PingRequest


# --------------------------------------------------------------------------- worker replies

ErrorKind = Literal["raised", "exit", "memory", "protocol", "missing", "not_callable",
                    "not_plain"]


class ErrorReport(TypedDict, total=False):
    """Why a request gave no value. `kind` says whose failure: "raised" (student code raised),
    "exit" (it called sys.exit), "memory" (MemoryError) carry every field below but `where`;
    "protocol" (the worker's own failure), "missing" (no such name), "not_callable" and
    "not_plain" (a result that cannot cross the boundary) carry `kind` and `message` only."""

    kind: ErrorKind
    type: str  # the exception's type (__qualname__)
    mro: list[str]  # the __qualname__ of each class of its MRO
    message: str  # clipped by the worker to `child.MESSAGE_LIMIT`
    traceback: str  # frames of student code only, clipped to `child.TRACEBACK_LIMIT`
    line: int | None  # the student's line it was raised at
    where: str  # load only: the chunk's label


def problem(kind: ErrorKind, message: str) -> ErrorReport:
    """The report of a failure that is no exception of student code."""
    return {"kind": kind, "message": message}


def raised(kind: ErrorKind, type_name: str, mro: list[str], message: str, traceback: str,
           line: int | None) -> ErrorReport:
    """The report of an exception raised by student code."""
    return {"kind": kind, "type": type_name, "mro": mro, "message": message,
            "traceback": traceback, "line": line}


class Failed(TypedDict):
    """worker -> grader, to any request: it gave no value."""

    ok: Literal[False]
    error: ErrorReport


def failed(error: ErrorReport) -> Failed:
    return {"ok": False, "error": error}


class Loaded(TypedDict):
    """worker -> grader, to `LoadRequest`: the module was built."""

    ok: Literal[True]
    names: dict[str, str]  # public name -> "class" | "function" | "other"
    cell_errors: list[ErrorReport]  # notebook cells that raised and did not stop the load
    more_cell_errors: int  # how many more did, not sent


def loaded(names: dict[str, str], cell_errors: list[ErrorReport]) -> Loaded:
    """The reply to a load: the first `CELL_ERRORS` cell errors, and how many more there were
    (a notebook of a thousand failing scratch cells sent a reply over the wire's limits, and
    lost the definitions its cells made)."""
    return {"ok": True, "names": names, "cell_errors": cell_errors[:CELL_ERRORS],
            "more_cell_errors": max(len(cell_errors) - CELL_ERRORS, 0)}


class Returned(TypedDict):
    """worker -> grader, to `CallRequest` and `ProbeRequest`: the value (plain data)."""

    ok: Literal[True]
    value: Any


def returned(value: Any) -> Returned:
    return {"ok": True, "value": value}


class Pong(TypedDict):
    """worker -> grader, to `PingRequest`."""

    ok: Literal[True]


def pong() -> Pong:
    return {"ok": True}


WorkerReply = Loaded | Returned | Pong | Failed  # what a worker sends


@dataclass(frozen=True)
class Reply:
    """A reply to `CallRequest`, `ProbeRequest` or `PingRequest` as the grader reads it: `ok`
    is a bool, and `error` a dict when it is False. Nothing else is checked: `value` is any
    plain data `wire` decodes, and each field of `error` (an `ErrorReport` as sent) must be
    read through bounds."""

    ok: bool
    value: Any = None  # when ok (None if the reply had none)
    error: dict[str, Any] | None = None  # when not ok


@dataclass(frozen=True)
class LoadReply:
    """A reply to `LoadRequest` as the grader reads it: a `Reply`, plus (when ok) at most
    `NAMES` public names (str -> str) and at most `CELL_ERRORS` cell errors (dicts, each field
    as sent). What breaks those shapes is dropped; `Malformed` only when `Reply` would be."""

    ok: bool
    error: dict[str, Any] | None = None  # when not ok
    names: dict[str, str] = field(default_factory=dict)
    cell_errors: list[dict[str, Any]] = field(default_factory=list)
    more_cell_errors: int = 0  # cells that raised beyond `cell_errors`


def parse_reply(raw: Any) -> Reply:
    """A worker's reply to a call, probe or ping; `Malformed` (saying `MALFORMED`) unless it
    is a dict with a bool `ok` and, when not ok, a dict `error`."""
    if type(raw) is not dict or type(raw.get("ok")) is not bool:
        raise Malformed(MALFORMED)
    if not raw["ok"]:
        if type(raw.get("error")) is not dict:
            raise Malformed(MALFORMED)
        return Reply(ok=False, error=raw["error"])
    return Reply(ok=True, value=raw.get("value"))


def parse_load_reply(raw: Any) -> LoadReply:
    """A worker's reply to a load (see `LoadReply`); `Malformed` as `parse_reply`."""
    reply = parse_reply(raw)
    if not reply.ok:
        return LoadReply(ok=False, error=reply.error)
    names, errors = raw.get("names"), raw.get("cell_errors")
    return LoadReply(
        ok=True,
        names={k: v for k, v in list(names.items())[:NAMES] if type(k) is str
               and type(v) is str} if type(names) is dict else {},
        cell_errors=[e for e in errors[:CELL_ERRORS] if type(e) is dict]
        if type(errors) is list else [],
        more_cell_errors=min(max(more, 0), 1 << 30) if type(more := raw.get("more_cell_errors"))
        is int else 0)


def parse_reply_to(request: Request, raw: Any) -> Reply | LoadReply:
    """The worker's reply `raw` to `request`, through the parser of that request's reply."""
    return parse_load_reply(raw) if request["op"] == "load" else parse_reply(raw)
