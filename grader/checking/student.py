"""`StudentModule`: a student's exercise module as checks see it, loaded in a sandboxed worker.

Checks call into it (`sub.call("scale", x, 2.0)`) and get plain data back, decoded in the
grader. Whatever goes wrong on the student's side arrives as a `StudentError` whose `status` and
message become the check's verdict; a worker that timed out, crashed or sent a reply over the
grader's budget is replaced for the next call, and a module that cannot be imported fails every
check with the same message.

A reply is read as hostile: its shape is checked by the parser of its declaration
(`grader.worker.messages`, in `Worker.request`) and every text it carries (exception types, MRO,
messages, tracebacks) is clipped here, whatever the worker claims to have clipped.
"""

from __future__ import annotations

import re
import sysconfig
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
import torch

from grader.checking.compare import CheckFailure, fail, format_call, short
from grader.models import ModuleSource, Reason, Status
from grader.checking.loading import import_failed
from grader.intake.submission import SKIPPED_CELL, not_submitted
from grader.worker import messages, wire
from grader.worker.client import ReplyRefused, Worker, WorkerCrashed, WorkerTimeout
from grader.worker.limits import WorkerLimits
from grader.worker.text import valid_text

# Bounds of what an exception description may bring into a message (the worker clips the
# message and the traceback to the same sizes; a patched worker does not).
TYPE_CHARS = 200  # a type name, and each MRO entry
MRO_ENTRIES = 64
MESSAGE_CHARS = 2000
# Python's own words for a module lacking a name (AttributeError, since 3.7).
MISSING_ATTRIBUTE = re.compile(r"module '(?P<module>[^']+)' has no attribute '(?P<name>[^']+)'")
# What faulthandler writes for a worker stopped for time (messages.WHERE_SIGNAL): one block per
# thread, innermost frame first.
STACK_DUMP = re.compile(r"^(?:Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):\n"
                        r"(?:  (?:File .*|<no Python frame>)\n?)*", re.M)
STACK_FRAME = re.compile(r'^  File "(?P<file>.*)", line (?P<line>\d+) in (?P<name>.*)$', re.M)
TRACEBACK_CHARS = 4000  # the last characters: the innermost frames
# Where this Python keeps its libraries (the workers see the same paths): Python's own words
# name them ("cannot import name 'x' from 'torch' (/opt/venv/lib/python3.11/site-packages/
# torch/__init__.py)"); a student reads the part from the package on, as on their machine.
INSTALL_DIRS = sorted({d.rstrip("/") + "/" for key in ("purelib", "platlib", "stdlib",
                                                        "platstdlib")
                       if (d := sysconfig.get_paths().get(key))}, key=len, reverse=True)


EARLIER = "an array the grader passed to an earlier call"


class StudentError(Exception):
    """Student code produced no usable value; the check gets `status`, `reason` and this
    message."""

    def __init__(self, message: str, *, status: Status = "error", call: str | None = None,
                 reason: Reason | None = None, stopped_at: str | None = None):
        super().__init__(message)
        self.status = status
        self.call = call
        self.reason = reason
        self.stopped_at = stopped_at  # CheckResult.stopped_at


class ModuleUnavailable(StudentError):
    """The module was not submitted, does not compile, or failed to import."""


class TimeBudget:
    """Seconds that student code may still take, spent by every call into it (and import)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.spent = 0.0

    def left(self) -> float:
        return self.seconds - self.spent


class StudentModule:
    """`budget`: the submission's time budget, shared by all its modules (default: one of
    `limits.submission_budget` for this module alone)."""

    def __init__(self, exercise: str, source: ModuleSource | None, *,
                 spawn: Callable[[WorkerLimits], Worker], limits: WorkerLimits,
                 budget: TimeBudget | None = None):
        self.exercise = exercise
        self.source = source
        self.limits = limits
        self.default_timeout = limits.call_timeout
        self.autograd = True  # False: the current check's calls run without backward passes
        self.forbid: list[str] = []  # aten operators the current check's calls may not run
        self.budget = budget or TimeBudget(limits.submission_budget)
        self._check_spent = 0.0  # seconds the current check's calls took (`end_check` resets)
        self._check_longest = 0.0  # the longest deadline one of them was given
        self.names: dict[str, str] = {}
        self.notes: list[str] = []  # notebook cells that raised, for the report
        self.import_output = ""
        self._spawn = spawn
        self._worker: Worker | None = None
        self._stopped: list[Worker] = []  # killed by `stop_worker`, to be closed at `close`
        self._failure: ModuleUnavailable | None = None
        self._loaded_once = False
        self._output: list[str] = []
        # Probes run during the current check: records made in the worker that its verdict
        # may rest on (`CheckResult.worker_records`); `end_check` starts a new list.
        self.worker_records: list[str] = []
        self._output_left = limits.output_total
        self.segments = wire.SegmentTable()
        # What several checks judge from one run, made once (`grader.checking.memo.shared`):
        # kept here, not in a table keyed by this object, so that a kept exception, whose
        # traceback holds frames that hold this object, dies with it.
        self.shared_records: dict[Any, tuple[bool, Any, list[str]]] = {}

    # ------------------------------------------------------------------ loading

    @property
    def filename(self) -> str:
        return self.source.path if self.source else f"{self.exercise}.py"

    def _load(self) -> Worker:
        if self._failure is not None:
            raise self._failure
        if self.source is None:
            self._failure = ModuleUnavailable(
                not_submitted(self.exercise), reason="not_submitted")
            raise self._failure
        if self.source.fatal:
            self._failure = ModuleUnavailable(self.source.fatal, reason="not_loaded")
            raise self._failure
        if self._worker is not None and self._worker.alive:
            return self._worker
        if self.budget.left() <= 0:
            raise self._over_submission_budget()
        started = time.monotonic()
        try:
            return self._start_worker()
        finally:
            spent = time.monotonic() - started  # an import again after a timeout: the check's
            self._check_spent += spent
            self.budget.spent += spent

    def _start_worker(self) -> Worker:
        assert self.source is not None  # `_load` said so
        worker = self._spawn(self.limits)
        request = messages.load_request(
            self.exercise, [cast(messages.Chunk, c.model_dump()) for c in self.source.chunks])
        first = not self._loaded_once
        self._loaded_once = True
        try:
            reply = worker.request(request, self.limits.load_timeout, self.segments)
        except WorkerTimeout as exc:
            self._fail_import(worker, first,
                              f"importing {self.filename} timed out after {exc.seconds:g} s: is "
                              "there an endless loop or a long computation at the top level? Put "
                              "scratch code under `if __name__ == \"__main__\":`.", "timeout")
        except WorkerCrashed as exc:
            self._fail_import(worker, first, f"importing {self.filename} crashed: {exc}", "crashed",
                              reason="lost" if exc.lost else "not_loaded")
        except ReplyRefused as exc:
            self._fail_import(worker, first, f"importing {self.filename} failed: {exc}.", "error")
        if first:
            self.import_output = worker.output.take()
        else:
            worker.output.take()
        if reply.error is not None:
            error = reply.error
            where = _text(error.get("where", self.filename), TYPE_CHARS)
            line = f", line {error['line']}" if type(error.get("line")) is int else ""
            status: Status = "crashed" if error.get("kind") == "memory" else "error"
            self._fail_import(worker, False,
                              import_failed(self.filename, f"{where}{line}", _describe(error)),
                              status)
        self.names = reply.names
        if first:
            self.notes = [f"{_text(e.get('where'), TYPE_CHARS)}: {_describe(e)}"
                          for e in reply.cell_errors]
            if reply.more_cell_errors:
                self.notes.append(f"... and {reply.more_cell_errors} more cells raised an "
                                  "error (each was skipped; the cells after it still ran)")
        self._worker = worker
        return worker

    @property
    def unavailable(self) -> str | None:
        """Why the module cannot run at all (not submitted, does not compile, failed to
        import), once a check has tried to load it; None otherwise."""
        return str(self._failure) if self._failure is not None else None

    def _fail_import(self, worker: Worker, first: bool, message: str, status: Status, *,
                     reason: Reason = "not_loaded"):
        output, where = self._split_stack(worker.close())
        if first:
            self.import_output = output
        self._failure = ModuleUnavailable(message, status=status, stopped_at=where, reason=reason)
        raise self._failure

    def _split_stack(self, output: str) -> tuple[str, str | None]:
        """The output of a worker stopped for time without the stacks it wrote when asked
        (`messages.WHERE_SIGNAL`), and where in the student's code it was then ("f.py, line 3,
        in g: `while True:`"; None when in none of its files)."""
        dumps = list(STACK_DUMP.finditer(output))
        if not dumps:
            return output, None
        rest = STACK_DUMP.sub("", output)
        chunks = {c.filename: c.code for c in self.source.chunks} if self.source else {}
        # faulthandler lists the newest thread first and the main thread, which runs the
        # call, last: a helper thread of the student's must not be named in its place.
        for dump in reversed(dumps):
            for frame in STACK_FRAME.finditer(dump.group()):
                if frame["file"] not in chunks:
                    continue
                number = int(frame["line"])
                lines = chunks[frame["file"]].splitlines()
                code = lines[number - 1].strip() if 0 < number <= len(lines) else ""
                return rest, (f"{_text(frame['file'], TYPE_CHARS)}, line {number}, in "
                              f"{_text(frame['name'], TYPE_CHARS)}"
                              + (f": `{_text(code, TYPE_CHARS)}`" if code else ""))
        return rest, None

    def _retire(self) -> None:
        if self._worker is not None:
            self._output.append(self._worker.close())
            self._worker = None

    def stop_worker(self) -> None:
        """End the worker now, freeing its memory (a kill: its descriptors and scratch folder
        go at `close`, off the submission's path when the batch closes in the background); the
        next call starts another, importing the module again. What the stopped worker printed
        after the last check took its output belongs to no check, and is dropped."""
        if self._worker is not None:
            self._worker.kill()
            self._stopped.append(self._worker)
            self._worker = None

    # ------------------------------------------------------------------ calls

    def has(self, name: str) -> bool:
        self._load()
        return name in self.names

    def call(self, name: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        """Call `name(*args, **kwargs)` in the worker and return its decoded result."""
        # The call's text is made only for a message: formatting arrays costs ~0.1 ms a call.
        text = lambda: format_call(name, args, kwargs)  # noqa: E731
        worker = self._load()
        if name not in self.names:
            raise self._not_defined(name, text())
        return self._request(worker, messages.call_request(name, list(args), kwargs), text,
                             timeout)

    def _not_defined(self, name: str, call: str) -> StudentError:
        skipped = [n for n in (self.source.notes if self.source else [])
                   if n.endswith(SKIPPED_CELL)]
        # (a cell that does not compile is skipped: what it defines is missing for that reason)
        advice = (f"a cell that does not compile was skipped, and it may define {name}: "
                  f"{skipped[0].splitlines()[0]}" if skipped else
                  "check its spelling and that it is defined at the top level of the file.")
        return StudentError(f"{self.filename} defines no {name}: {advice}", call=call,
                            reason="not_defined")

    def _missing_name(self, error: dict) -> str | None:
        """The name a probe looked up in the student's module and did not find (its
        AttributeError names this module and a name it does not define), else None."""
        if error.get("type") != "AttributeError":
            return None
        found = MISSING_ATTRIBUTE.fullmatch(str(error.get("message", "")))
        if found is None or found["module"] != self.exercise or found["name"] in self.names:
            return None
        return found["name"]

    def timed_call(self, name: str, *args: Any, timeout: float | None = None,
                   **kwargs: Any) -> tuple[Any, float | None]:
        """`call`, plus the CPU seconds the worker's processes used meanwhile (threads and child
        processes included), read by the grader from the kernel's accounts, not reported by the
        worker; None where /proc cannot tell. Includes decoding the arguments and encoding the
        result in the worker (about a millisecond per MB)."""
        worker = self._load()
        before = worker.cpu_seconds()
        value = self.call(name, *args, timeout=timeout, **kwargs)
        after = worker.cpu_seconds() if worker is self._worker else None
        return value, (after - before if before is not None and after is not None else None)

    def probe(self, probe: str, *args: Any, timeout: float | None = None, label: str = "",
              **kwargs: Any) -> Any:
        """Run `grader.probes.<module>:<function>(student_module, *args, **kwargs)` in the worker.

        Its record is made next to the student's code: the check's result names the probe
        (`worker_records`), so that a verdict resting on it says so."""
        worker = self._load()
        self.note_worker_record(probe)
        text = lambda: label or format_call(probe.partition(":")[2], args, kwargs)  # noqa: E731
        return self._request(worker, messages.probe_request(probe, list(args), kwargs), text,
                             timeout)

    def note_worker_record(self, probe: str) -> None:
        """Count `probe` among the records the current check rests on (also for a record
        computed once and shared by several checks)."""
        if probe not in self.worker_records:
            self.worker_records.append(probe)

    def raises(self, expected: type[BaseException], name: str, *args: Any,
               hint: str | None = None, **kwargs: Any) -> None:
        """The call must raise `expected` (or a subclass); fails the check otherwise."""
        text = format_call(name, args, kwargs)
        try:
            value = self.call(name, *args, **kwargs)
        except StudentRaised as exc:
            if expected.__name__ in exc.mro:
                return
            if exc.type == "NotImplementedError":
                raise
            raise CheckFailure(f"{text} raised {exc.type}; expected {expected.__name__}.\n"
                               f"{exc.detail}".rstrip(), call=text,
                               expected=expected.__name__, got=exc.type, hint=hint) from None
        raise CheckFailure(f"{text} returned {short(value)}; expected it to raise "
                           f"{expected.__name__}.", call=text, expected=expected.__name__,
                           got=short(value), hint=hint)

    @property
    def check_budget(self) -> float:
        """Seconds all the calls of the current check may take together: at least twice the
        longest deadline the check gives a call, so that a call always gets its own."""
        return max(self.limits.check_budget,
                   2 * max(self.default_timeout, self._check_longest))

    def _over_submission_budget(self, text: str | None = None, *,
                                stopped: bool = False) -> StudentError:
        budget = self.budget.seconds
        what = f"{text} was {'stopped' if stopped else 'not run'}" if text else \
            "This check was not run"
        return StudentError(
            f"{what}: your code has used the "
            f"{budget:g} s that all the checks of a submission may spend in it together (the "
            "checks that ran before have their verdicts). Something in it is far too slow.",
            status="timeout", call=text)

    def _over_check_budget(self, text: str) -> StudentError:
        return StudentError(
            f"{text} was stopped: this check's calls into your code took {self.check_budget:g} "
            "s in all, the most one check may spend in it (more than each call's own "
            "deadline). Something in it is far too slow.",
            status="timeout", call=text)

    def _request(self, worker: Worker, message: messages.CallRequest | messages.ProbeRequest,
                 describe: Callable[[], str], timeout: float | None) -> Any:
        seconds = timeout or self.default_timeout
        self._check_longest = max(self._check_longest, seconds)
        # The call's deadline, or less: what is left of the check's and the submission's budgets.
        check_left = self.check_budget - self._check_spent
        deadline = min(seconds, check_left, self.budget.left())
        if deadline <= 0:
            text = describe()
            raise (self._over_check_budget(text) if check_left <= 0
                   else self._over_submission_budget(text))
        if not self.autograd:
            message["autograd"] = False
        if self.forbid:
            message["forbid"] = list(self.forbid)
        self.segments.publish()
        started = time.monotonic()
        try:
            reply = worker.request(message, deadline, self.segments)
        except WorkerTimeout:
            self.segments.settle()  # no verdict on them: the call already failed
            self._retire()
            where = None
            if self._output:
                self._output[-1], where = self._split_stack(self._output[-1])
            text = describe()
            if deadline < seconds:
                raise (self._over_check_budget(text) if check_left <= self.budget.left()
                       else self._over_submission_budget(text, stopped=True)) from None
            raise StudentError(f"{text} timed out after {seconds:g} s (an endless loop, or far "
                               "too slow).", status="timeout", call=text,
                               stopped_at=where) from None
        except WorkerCrashed as exc:
            self.segments.settle()
            self._retire()
            text = describe()
            raise StudentError(f"{text} crashed: {exc}.", status="crashed", call=text,
                               reason="lost" if exc.lost else None) from None
        except ReplyRefused as exc:
            self.segments.settle()
            self._retire()
            text = describe()
            raise StudentError(f"{text} failed: {exc}. Return the kind of value the contract "
                               "names, of the size it names.", call=text) from None
        finally:
            spent = time.monotonic() - started
            self._check_spent += spent
            self.budget.spent += spent
        self._check_shared(self.segments.settle(), message, describe)
        if reply.error is None:
            return reply.value
        error = reply.error
        kind = error.get("kind")
        text = describe()
        if kind == "memory":
            self._retire()
            raise StudentError(f"{text} ran out of memory (the limit is "
                               f"{self.limits.address_space / 2**30:g} GiB).", status="crashed",
                               call=text)
        if kind == "raised":
            # A probe that looks a function up by name meets a missing one as an AttributeError:
            # said as `call` says it, not as an error the student's code raised.
            missing = self._missing_name(error)
            if missing is not None:
                raise self._not_defined(missing, text)
            raise StudentRaised(text, error)
        if kind == "not_plain":
            raise StudentError(f"{text} {_text(error.get('message'), MESSAGE_CHARS)}: return the "
                               "kind of value the contract names (numbers, tuples, numpy arrays, "
                               "tensors).", call=text)
        raise StudentError(f"{text}: {_describe(error)}", call=text)

    def _check_shared(self, changed: list[wire.Allocation],
                      message: messages.CallRequest | messages.ProbeRequest,
                      describe: Callable[[], str]) -> None:
        """Fail the check if the call changed a shared array it may not change (by the time
        its reply was in): the grader's copy still holds the values from before the call."""
        if not changed:
            return
        text = describe()
        # Arrays of this call first: they are the ones the student can find in the code.
        named = sorted(((*self._name_of(a, message), a) for a in changed),
                       key=lambda found: found[0] == EARLIER)
        names = [name for name, _, _ in named]
        what = " and ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        example = ""
        name, whole, alloc = named[0]
        change = alloc.first_change(self.segments)
        if change is not None:  # None: the worker has put the old bytes back since
            index, before, now = change
            element = f"{name}[{', '.join(map(str, index))}]" if whole and index else \
                "one element" if index else name
            example = f" ({element} went from {before!r} to {now!r})"
        fail(f"{text} changed its input {what}: after the call it holds other values than the "
             f"ones passed in{example}. A function must leave the arrays it is given as they "
             "were unless its contract says it writes into them.",
             call=text, expected=f"{names[0]} unchanged", got=f"{names[0]} modified",
             hint="x -= ..., x[...] = ..., np.add(x, ..., out=x) or a thread that keeps "
                  "running write into the caller's array; x - ... or x.copy() make a new one.",
             evidence={"changed_inputs": names})

    def _name_of(self, alloc: wire.Allocation,
                 message: messages.CallRequest | messages.ProbeRequest) -> tuple[str, bool]:
        """What the check calls `alloc` (`shared(name=)`), else where it is among the call's
        arguments ("argument 2", "params['W1']"), else that an earlier call received it; and
        whether that name stands for the whole array (not a view of part of it)."""
        if alloc.name:
            return alloc.name, True
        lo, hi = alloc.bounds(self.segments)
        places = [(f"argument {i + 1}", v) for i, v in enumerate(message["args"])]
        places += list(message["kwargs"].items())
        while places:
            label, value = places.pop(0)
            if isinstance(value, dict):
                places += [(f"{label}[{k!r}]", v) for k, v in value.items()]
            elif isinstance(value, (list, tuple)):
                places += [(f"{label}[{i}]", v) for i, v in enumerate(value)]
            elif isinstance(value, (np.ndarray, torch.Tensor)) and _overlaps(value, lo, hi):
                return label, _is_whole(value, alloc, lo)
        return EARLIER, False

    # ------------------------------------------------------------------ shared memory

    def shared(self, value: np.ndarray | torch.Tensor, *, name: str | None = None,
               may_change: bool = False) -> np.ndarray | torch.Tensor:
        """A copy of `value` in memory shared with the worker: a view of it that the student's
        code returns comes back as a view of this very memory.

        Keep `value` as the private copy to compute expected values from. After every call
        the copy returned here still holds `value` (what the worker wrote is compared once,
        when its reply is in, and never read later), or the check has failed with "changed
        its input `name`". `may_change=True` lets calls write into it (their writes then show
        here): the check itself must judge what the call left there.
        """
        if isinstance(value, torch.Tensor):
            return torch.from_numpy(self.segments.shared_copy(
                value.detach().numpy(), name=name, may_change=may_change))
        return self.segments.shared_copy(np.asarray(value), name=name, may_change=may_change)

    # ------------------------------------------------------------------ bookkeeping

    def end_check(self) -> str:
        """Output printed since the last call of this method (within what is left of
        `limits.output_total`); frees this check's shared memory and starts a new list of
        `worker_records` and a new check's budget."""
        self.worker_records = []
        self._check_spent = self._check_longest = 0.0
        if self._worker is not None:
            self._output.append(self._worker.output.take())
        text = "".join(self._output)
        self._output = []
        self.segments.close()
        if len(text) > self._output_left:
            text = text[: self._output_left] + (
                "\n[... further output omitted: a report keeps at most "
                f"{self.limits.output_total // 1024} KB of output per exercise ...]\n")
        self._output_left = max(self._output_left - len(text), 0)
        return text

    def close(self) -> None:
        self._retire()
        for worker in self._stopped:
            worker.close()
        self._stopped = []
        self.shared_records = {}
        self._output = []
        self.segments.close()


def _overlaps(value: np.ndarray | torch.Tensor, lo: int, hi: int) -> bool:
    """`value`'s memory meets the address range [lo, hi)."""
    shape: tuple[int, ...]
    strides: Sequence[int]
    if isinstance(value, torch.Tensor):
        if value.layout != torch.strided or value.numel() == 0:
            return False
        size = value.element_size()
        start, shape, strides = value.data_ptr(), value.shape, [s * size for s in value.stride()]
    else:
        if value.size == 0:
            return False
        start, shape, strides = value.ctypes.data, value.shape, value.strides
        size = value.itemsize
    first, last = wire._byte_bounds(int(start), shape, strides, size)
    return first < hi and lo < last


def _is_whole(value: np.ndarray | torch.Tensor, alloc: wire.Allocation, lo: int) -> bool:
    """`value` is the allocation itself: same start, shape and dtype, C-ordered."""
    a = value.detach().numpy() if isinstance(value, torch.Tensor) else value
    return (int(a.ctypes.data) == lo and a.shape == alloc.shape and a.dtype == alloc.dtype
            and a.flags.c_contiguous)


class StudentRaised(StudentError):
    """The student's function raised an exception (the check may have expected that)."""

    def __init__(self, call: str, error: dict):
        self.type = _text(error.get("type", "Exception"), TYPE_CHARS)
        mro = error.get("mro")
        self.mro = [_text(m, TYPE_CHARS) for m in mro[:MRO_ENTRIES]] if type(mro) is list else []
        self.raw_message = _text(error.get("message", ""), MESSAGE_CHARS)
        self.detail = _text(error.get("traceback", ""), TRACEBACK_CHARS, tail=True).rstrip()
        reason: Reason | None = None
        if self.type == "NotImplementedError":
            message = f"{call} is not implemented yet (it raises NotImplementedError)."
            reason = "not_implemented"
        else:
            message = f"{call} raised {self.type}: {self.raw_message}"
            if self.detail:
                message += "\n" + self.detail
        super().__init__(message, call=call, reason=reason)


def _describe(error: dict) -> str:
    """An error the worker described, in one bounded text."""
    kind = error.get("kind")
    if kind in ("exit", "protocol", "missing", "not_callable", "not_plain"):
        return _text(error.get("message"), MESSAGE_CHARS)
    text = (f"{_text(error.get('type', 'Exception'), TYPE_CHARS)}: "
            f"{_text(error.get('message', ''), MESSAGE_CHARS)}")
    if kind == "memory":
        text = "ran out of memory: " + text
    if error.get("traceback"):
        text += "\n" + _text(error["traceback"], TRACEBACK_CHARS, tail=True).rstrip()
    return _without_install_dirs(text)


def _without_install_dirs(text: str) -> str:
    for directory in INSTALL_DIRS:
        text = text.replace(directory, "")
    return text


def _text(value: Any, limit: int, *, tail: bool = False) -> str:
    """A text a worker sent, at most about `limit` characters of valid UTF-8 (its head, or
    with `tail` its end); anything else it sent in its place is described briefly."""
    text = value if isinstance(value, str) else short(value, limit)
    if len(text) > limit:
        cut = f"[... {len(text) - limit:,} characters omitted ...]"
        text = cut + text[-limit:] if tail else text[:limit] + cut
    return valid_text(text)

