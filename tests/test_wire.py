"""The wire format decodes plain data only, and shared views come back as grader memory; the
messages that travel on it keep their declared shape."""

import contextlib
import json
import os
import socket
import sys
import tempfile
import threading

import numpy as np
import pytest
import torch

from grader.checking.student import ModuleUnavailable, StudentError, StudentModule, StudentRaised
from grader.models import ModuleSource, SourceChunk
from grader.worker import messages, wire
from grader.worker.client import Worker, Zygote, ZygoteError
from grader.worker.limits import WorkerLimits

pytestmark = pytest.mark.fast


def roundtrip(value, table=None):
    enc = wire.encode(value, table)
    doc = json.loads(json.dumps(enc.doc))
    return wire.decode(doc, enc.buffers, table)


@pytest.mark.parametrize("value", [
    None, True, 0, -7, 2**80, 1.5, float("inf"), "héllo", b"\x00\x01", 3 + 4j,
    [1, [2, (3, 4)]], (1,), (), {"a": 1, 2: (3,), (1, 2): None},
])
def test_plain_values_roundtrip(value):
    assert roundtrip(value) == value
    assert type(roundtrip(value)) is type(value)


def test_nan_roundtrips():
    assert np.isnan(roundtrip(float("nan")))


@pytest.mark.parametrize("dtype", sorted(wire.NUMPY_DTYPES))
def test_arrays_roundtrip_with_dtype_shape_and_flags(dtype):
    a = (np.arange(24).reshape(2, 3, 4) % 5).astype(dtype)[:, ::2]
    b = roundtrip(a)
    assert b.dtype == a.dtype and b.shape == a.shape and np.array_equal(a, b)
    ro = np.broadcast_to(a[0], (3,) + a[0].shape)
    assert not roundtrip(ro).flags.writeable


def test_numpy_scalars_keep_their_type():
    for x in (np.float32(1.5), np.int64(3), np.bool_(True), np.complex64(1j)):
        y = roundtrip(x)
        assert type(y) is type(x) and y == x


@pytest.mark.parametrize("dtype", list(wire.TORCH_DTYPES.values()))
def test_tensors_roundtrip(dtype):
    t = (torch.arange(12) % 3).to(dtype).reshape(3, 4).t()
    u = roundtrip(t)
    assert u.dtype == t.dtype and u.shape == t.shape and torch.equal(u, t)


def test_tensor_flags_and_parameters():
    p = torch.nn.Parameter(torch.ones(2))
    q = roundtrip(p)
    assert type(q) is torch.nn.Parameter and q.requires_grad
    assert roundtrip(torch.ones(2, requires_grad=True)).requires_grad
    assert roundtrip(torch.Size([2, 3])) == torch.Size([2, 3])
    assert roundtrip(torch.float16) is torch.float16
    assert roundtrip(np.dtype("int8")) == np.dtype("int8")


class AlwaysEqual(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


@pytest.mark.parametrize("value", [
    AlwaysEqual(3), object(), [1, object()], {"k": AlwaysEqual(1)}, np.array([object()]),
    np.ma.masked_array([1, 2]), lambda: 1, torch.zeros(2).to_sparse(), type("T", (tuple,), {})(),
])
def test_non_plain_values_are_refused_with_their_type(value):
    with pytest.raises(wire.NotPlainData) as info:
        wire.encode(value)
    assert "not" in str(info.value)


def test_self_referencing_list_is_refused():
    a = []
    a.append(a)
    with pytest.raises(wire.NotPlainData):
        wire.encode(a)


@pytest.mark.parametrize("doc", [
    {"v": {"$": "pickle", "data": "x"}},
    {"v": {"$": "ndarray", "dtype": "object", "shape": [1], "buf": 0}},
    {"v": {"$": "ndarray", "dtype": "float64", "shape": [3], "buf": 0}},  # 8 bytes, not 24
    {"v": {"$": "ndarray", "dtype": "float64", "shape": [-1], "buf": 0}},
    {"v": {"$": "tensor", "dtype": "float64", "shape": [2], "buf": 5}},
    {"v": {"$": "ndarray", "dtype": "float64", "shape": [1],
           "view": {"seg": 1, "offset": 0, "strides": [8]}}},
    {"v": {"$": "dict", "items": [[[1], 2]]}},
    {"v": {"$": "dtype", "lib": "numpy", "name": "object"}},
    {"v": "x", "segs": [{"id": 1, "size": 8, "fd": 0}]},
    [1, 2],
])
def test_malformed_documents_raise_wire_error(doc):
    with pytest.raises(wire.WireError):
        wire.decode(doc, [b"\x00" * 8])


def test_shared_views_are_rebuilt_on_the_graders_own_memory():
    grader_side, worker_side = wire.SegmentTable(), wire.SegmentTable()
    a = grader_side.shared_copy(np.arange(12.0).reshape(3, 4))
    enc = wire.encode([a[::-1], a], grader_side, send_fds=True)
    assert len(enc.fds) == 1  # one segment, sent once
    # the worker adopts the segment and returns a view of it (a transpose)
    got_a = wire.decode(enc.doc, enc.buffers, worker_side, list(enc.fds))[1]
    reply = wire.encode(got_a.T, worker_side)
    assert "view" in reply.doc["v"] and not reply.buffers
    back = wire.decode(reply.doc, reply.buffers, grader_side)
    assert np.shares_memory(back, a) and back.strides == (8, 32)
    a[0, 1] = 99.0  # a write by the grader is seen through the view it rebuilt
    assert back[1, 0] == 99.0
    # a view outside the segment is refused
    bad = {"v": {"$": "ndarray", "dtype": "float64", "shape": [wire.ARENA_BYTES],
                 "view": {"seg": reply.doc["v"]["view"]["seg"], "offset": 0, "strides": [8]}}}
    with pytest.raises(wire.WireError):
        wire.decode(bad, [], grader_side)


def test_frame_reader_enforces_limits_before_buffering():
    limits = wire.Limits(max_bytes=1000)
    reader = wire.FrameReader(limits)
    enc = wire.encode(np.zeros(1000))
    head, doc = wire._frame_header(enc)
    reader.feed(head)
    with pytest.raises(wire.WireError):
        reader.frame()


def test_frames_cross_a_socket_in_pieces():
    a, b = socket.socketpair()
    enc = wire.encode({"x": np.arange(100000.0)})
    sender = threading.Thread(target=wire.send_frame, args=(a, enc))
    sender.start()
    reader = wire.FrameReader()
    frame = None
    while frame is None:
        reader.feed(b.recv(4096))
        frame = reader.frame()
    value = wire.decode(*frame)
    assert np.array_equal(value["x"], np.arange(100000.0))
    sender.join()
    a.close(), b.close()


# --------------------------------------------------------------------------- messages
# Every message between the grader and the worker sandbox is declared in
# grader/worker/messages.py; these tests pin the wire format (keys, their order, values) to what
# it was before the declarations, and the grader's parsers to the errors it always gave.

ERROR = {"kind": "raised", "type": "ValueError", "mro": ["ValueError", "Exception"],
         "message": "bad", "traceback": '  File "m.py", line 2\n', "line": 2}
CHUNK = {"code": "x = 1\n", "filename": "m.py", "label": "m.py", "first_line": 1,
         "keep_going": False}


def as_sent(value):
    """`value` after a trip over the wire, as the other side decodes it."""
    enc = wire.encode(value)
    return wire.decode(json.loads(json.dumps(enc.doc)), enc.buffers)


@pytest.mark.parametrize("built, literal", [
    (messages.spawn("/s/w1", {"memory": 5}), {"op": "spawn", "scratch": "/s/w1",
                                              "limits": {"memory": 5}}),
    (messages.ready(7, 1, True, ["/x"], memory=2, pids=None, cpu=1),
     {"op": "ready", "pid": 7, "threads": 1, "contained": True, "leaks": ["/x"],
      "cgroup": {"memory": 2, "pids": None, "cpu": 1}}),
    (messages.spawned(9), {"op": "spawned", "pid": 9}),
    (messages.not_spawned("no uid"), {"op": "spawned", "pid": None, "error": "no uid"}),
    (messages.exited(9, code=None, signal=9, memory=True),
     {"op": "exited", "pid": 9, "code": None, "signal": 9, "memory": True, "lost": False}),
    (messages.load_request("m", [CHUNK]), {"op": "load", "module": "m", "chunks": [CHUNK]}),
    (messages.call_request("f", [1, (2,)], {"k": 3}),
     {"op": "call", "name": "f", "args": [1, (2,)], "kwargs": {"k": 3}}),
    (messages.probe_request("p:q", [], {}), {"op": "probe", "probe": "p:q", "args": [],
                                              "kwargs": {}}),
    (messages.ping_request(), {"op": "ping"}),
    (messages.pong(), {"ok": True}),
    (messages.returned([1.5]), {"ok": True, "value": [1.5]}),
    (messages.loaded({"f": "function"}, [ERROR]),
     {"ok": True, "names": {"f": "function"}, "cell_errors": [ERROR], "more_cell_errors": 0}),
    (messages.failed(messages.problem("protocol", "no module loaded")),
     {"ok": False, "error": {"kind": "protocol", "message": "no module loaded"}}),
    (messages.failed(messages.raised("raised", "ValueError", ["ValueError", "Exception"], "bad",
                                     '  File "m.py", line 2\n', 2)),
     {"ok": False, "error": ERROR}),
])
def test_each_message_is_built_as_the_wire_format_has_it(built, literal):
    assert type(built) is dict and built == literal
    assert json.dumps(wire.encode(built).doc) == json.dumps(wire.encode(literal).doc)  # key order


def test_control_messages_round_trip_through_their_parsers():
    for msg in (messages.ready(7, 1, False, [], memory=None, pids=1, cpu=None),
                messages.spawned(3), messages.not_spawned("why"),
                messages.exited(3, 0, None, False)):
        assert messages.parse_control(as_sent(msg)) == msg


@pytest.mark.parametrize("msg, field", [
    ({"op": "ready", "threads": 1, "contained": True, "leaks": [],
      "cgroup": {"memory": None, "pids": None, "cpu": None}}, "pid"),
    ({**messages.ready(1, 1, True, [], None, None, None), "threads": True}, "threads"),
    ({**messages.ready(1, 1, True, [], None, None, None), "contained": 1}, "contained"),
    ({**messages.ready(1, 1, True, [], None, None, None), "leaks": "/etc"}, "leaks"),
    ({**messages.ready(1, 1, True, [], None, None, None), "leaks": [1]}, "leaks"),
    ({**messages.ready(1, 1, True, [], None, None, None), "cgroup": {"memory": 1}}, "cgroup"),
    ({**messages.ready(1, 1, True, [], None, None, None), "cgroup": {"memory": "1", "pids": 1}},
     "cgroup"),
    ({"op": "spawned", "pid": "12"}, "pid"),
    ({"op": "spawned", "pid": None}, "error"),
    ({"op": "spawned", "pid": None, "error": 5}, "error"),
    ({**messages.exited(3, 0, None, False), "pid": None}, "pid"),
    ({**messages.exited(3, 0, None, False), "code": 1.0}, "code"),
    ({**messages.exited(3, 0, None, False), "signal": "9"}, "signal"),
    ({**messages.exited(3, 0, None, False), "memory": None}, "memory"),
    ({**messages.exited(3, 0, None, False), "lost": 1}, "lost"),
])
def test_malformed_control_messages_are_refused_naming_the_field(msg, field):
    with pytest.raises(messages.Malformed) as info:
        messages.parse_control(msg)
    assert repr(field) in str(info.value) and repr(msg["op"]) in str(info.value)


@pytest.mark.parametrize("msg", [None, [1], "ready", {"pid": 3}, {"op": "spawn"}, {"op": 5},
                                 {"op": ["ready"]}])
def test_what_is_no_control_message_is_skipped(msg):
    assert messages.parse_control(msg) is None


def test_the_zygote_takes_a_spawn_only_of_its_declared_shape():
    assert messages.is_spawn(as_sent(messages.spawn("/s", {"memory": 1})))
    for msg in ([], {"op": "spawn", "scratch": "/s"}, {"op": "spawn", "scratch": 1, "limits": {}},
                {"op": "spawned", "scratch": "/s", "limits": {}}):
        assert not messages.is_spawn(msg)


def test_replies_round_trip_through_their_parsers():
    assert messages.parse_reply(as_sent(messages.returned((1, "a")))) == messages.Reply(
        ok=True, value=(1, "a"))
    assert messages.parse_reply(as_sent(messages.pong())) == messages.Reply(ok=True)
    failed = messages.failed(messages.problem("missing", "no f defined"))
    assert messages.parse_reply(as_sent(failed)) == messages.Reply(
        ok=False, error={"kind": "missing", "message": "no f defined"})
    loaded = messages.loaded({"f": "function", "C": "class"}, [dict(ERROR, where="cell 2")])
    assert messages.parse_load_reply(as_sent(loaded)) == messages.LoadReply(
        ok=True, names={"f": "function", "C": "class"}, cell_errors=[dict(ERROR, where="cell 2")])
    assert messages.parse_load_reply(as_sent(messages.failed(ERROR))) == messages.LoadReply(
        ok=False, error=ERROR)
    assert messages.parse_reply_to(messages.load_request("m", []), loaded).names
    assert messages.parse_reply_to(messages.call_request("f", [], {}), loaded) == \
        messages.Reply(ok=True)  # a call's reply has a value, None when it is missing


MALFORMED_REPLIES = [None, [1, 2, 3], "ok", {"value": 3}, {"ok": 1, "value": 3},
                     {"ok": "True"}, {"ok": False}, {"ok": False, "error": 5},
                     {"ok": False, "error": ["raised"]}]


@pytest.mark.parametrize("raw", MALFORMED_REPLIES)
def test_malformed_replies_are_refused_with_the_existing_message(raw):
    for parse in (messages.parse_reply, messages.parse_load_reply):
        with pytest.raises(messages.Malformed) as info:
            parse(as_sent(raw))
        assert str(info.value) == "the worker sent a malformed reply"


def test_a_load_reply_brings_in_names_and_cell_errors_of_their_shape_only_and_bounded():
    names = {f"n{i}": "function" for i in range(messages.NAMES + 50)}
    names.update({1: "function", "C": 2, "D": ["class"]})
    errors = [ERROR] * (messages.CELL_ERRORS + 5) + ["cell", 3]
    reply = messages.parse_load_reply(as_sent({"ok": True, "names": names,
                                               "cell_errors": errors}))
    assert len(reply.names) == messages.NAMES and "n0" in reply.names
    assert all(type(k) is str and type(v) is str for k, v in reply.names.items())
    assert reply.cell_errors == [ERROR] * messages.CELL_ERRORS
    odd = messages.parse_load_reply({"ok": True, "names": ["f"], "cell_errors": {"a": 1}})
    assert odd == messages.LoadReply(ok=True)


def test_the_worker_answers_through_the_declarations():
    from grader.worker import child

    source = "def f(x):\n    return 2 * x\n\ndef g():\n    raise KeyError('k')\n\nN = 3\n"
    chunk = dict(CHUNK, code=source, filename="tg_messages_m.py")
    request = as_sent(messages.load_request("tg_messages_m", [chunk]))
    try:
        module, reply = child.load(request)
        loaded = messages.parse_load_reply(as_sent(reply))
        assert loaded.names == {"f": "function", "g": "function", "N": "other"}
        assert list(reply) == ["ok", "names", "cell_errors", "more_cell_errors"]
        answer = child.call(module, as_sent(messages.call_request("f", [21], {})))
        assert answer == messages.returned(42)
        error = messages.parse_reply(as_sent(child.call(module, messages.call_request(
            "g", [], {})))).error
        assert list(error) == ["kind", "type", "mro", "message", "traceback", "line"]
        assert error["kind"] == "raised" and error["type"] == "KeyError" and error["line"] == 5
        assert child.call(module, messages.call_request("h", [], {})) == messages.failed(
            messages.problem("missing", "no h defined"))
        assert child.call(None, messages.call_request("f", [], {})) == messages.failed(
            messages.problem("protocol", "no module loaded"))
    finally:
        sys.modules.pop("tg_messages_m", None)


# A worker played by a thread (no sandbox): each request gets the next scripted reply, sent as
# plain data. The checks' side (StudentModule, Worker.request) is the real one.


class ScriptedWorker:
    def __init__(self, replies: list):
        self.grader_end, self.worker_end = socket.socketpair()
        self.out_r, self.out_w = os.pipe()
        self.requests: list = []
        self.thread = threading.Thread(target=self._serve, args=(list(replies),), daemon=True)
        self.thread.start()

    def _serve(self, replies: list) -> None:
        for reply in replies:
            try:
                doc, buffers, fds = wire.recv_frame(self.worker_end)
            except (EOFError, OSError):
                return
            self.requests.append(wire.decode(doc, buffers, None, fds))
            wire.send_frame(self.worker_end, wire.encode(reply))

    def spawn(self, limits: WorkerLimits) -> Worker:
        """`Zygote.spawn`'s place: pid 0 (nothing to kill), a scratch folder of its own."""
        return Worker(None, 0, self.grader_end, self.out_r, tempfile.mkdtemp(), limits)

    def close(self) -> None:
        self.worker_end.close()
        os.close(self.out_w)
        self.thread.join(5)


@contextlib.contextmanager
def scripted_module(*replies):
    worker = ScriptedWorker(list(replies))
    source = ModuleSource(exercise="m", path="m.py", kind="py",
                          chunks=[SourceChunk(code="def f(x): ...\n", filename="m.py",
                                              label="m.py")])
    sub = StudentModule("m", source, spawn=worker.spawn,
                        limits=WorkerLimits(call_timeout=5.0, load_timeout=5.0))
    try:
        yield sub, worker
    finally:
        sub.close()
        worker.close()


LOADED = {"ok": True, "names": {"f": "function"}, "cell_errors": []}


def test_requests_cross_the_wire_as_they_always_did():
    with scripted_module(LOADED, {"ok": True, "value": 42}, {"ok": True, "value": 7}) as (sub,
                                                                                        worker):
        assert sub.call("f", 21, k=(1,)) == 42
        assert sub.probe("pm:pf", 2.5) == 7
    load, call, probe = worker.requests
    assert list(load.items()) == [("op", "load"), ("module", "m"), ("chunks", [
        {"code": "def f(x): ...\n", "filename": "m.py", "label": "m.py", "first_line": 1,
         "keep_going": False}])]
    assert list(call.items()) == [("op", "call"), ("name", "f"), ("args", [21]),
                                  ("kwargs", {"k": (1,)})]
    assert list(probe.items()) == [("op", "probe"), ("probe", "pm:pf"), ("args", [2.5]),
                                   ("kwargs", {})]


@pytest.mark.parametrize("raw", MALFORMED_REPLIES)
def test_a_malformed_call_reply_crashes_that_call_only(raw):
    with scripted_module(LOADED, raw) as (sub, _):
        with pytest.raises(StudentError) as info:
            sub.call("f", 1)
        assert info.value.status == "crashed"
        assert str(info.value) == "f(1) crashed: the worker sent a malformed reply."
        assert sub.unavailable is None  # the module is still there for the next call


@pytest.mark.parametrize("raw", MALFORMED_REPLIES)
def test_a_malformed_load_reply_fails_the_import(raw):
    with scripted_module(raw) as (sub, _):
        with pytest.raises(ModuleUnavailable) as info:
            sub.call("f", 1)
        assert info.value.status == "crashed"
        assert str(info.value) == "importing m.py crashed: the worker sent a malformed reply"


def test_odd_fields_of_a_reply_are_read_through_bounds():
    odd_error = {"kind": "raised", "type": [1, 2], "mro": 7, "message": {}, "line": "x"}
    cell = {"kind": "raised", "type": "T" * 10_000, "where": ["c"], "message": "m"}
    load = {"ok": True, "names": {"f": "function", "g": 3}, "cell_errors": [cell, "x"]}
    with scripted_module(load, {"ok": False, "error": odd_error}) as (sub, _):
        with pytest.raises(StudentRaised) as info:
            sub.call("f", 1)
        assert info.value.type == "[1, 2]" and info.value.mro == []
        assert sub.names == {"f": "function"}
        assert len(sub.notes) == 1 and len(sub.notes[0]) < 1000


def test_a_failed_load_names_where_it_failed():
    error = dict(ERROR, where="cell 3", line=4)
    with scripted_module({"ok": False, "error": error}) as (sub, _):
        with pytest.raises(ModuleUnavailable) as info:
            sub.call("f", 1)
        assert info.value.status == "error"
        assert str(info.value).startswith("importing m.py failed (cell 3, line 4): ValueError: bad")


def control_socket():
    """A `Zygote` reading its control socket, without its process: (zygote, the zygote's end)."""
    zygote = Zygote.__new__(Zygote)
    zygote.ctrl, theirs = socket.socketpair()
    zygote._reader = wire.FrameReader(wire.REPLY_LIMITS)
    zygote._exits, zygote._lock = {}, threading.Lock()
    zygote._log = tempfile.TemporaryFile()
    zygote._log.write(b"zygote log")
    return zygote, theirs


def test_the_grader_reads_control_messages_through_their_parsers():
    zygote, theirs = control_socket()
    with zygote.ctrl, theirs, zygote._log:
        for msg in ([1], {"op": "new"}, messages.exited(5, None, 9, True), messages.spawned(6)):
            wire.send_frame(theirs, wire.encode(msg))
        assert zygote._next(lambda m: m["op"] == "spawned", 5) == messages.spawned(6)
        assert zygote.exit_note(5) == messages.exited(5, None, 9, True)  # recorded on the way
        wire.send_frame(theirs, wire.encode({"op": "spawned", "pid": [6]}))
        with pytest.raises(ZygoteError, match="'spawned' message with a malformed 'pid'"):
            zygote._next(lambda m: m["op"] == "spawned", 5)
        wire.send_frame(theirs, wire.encode({"op": "exited", "pid": 7}))
        assert zygote.exit_note(7, timeout=5) is None  # the death is told without its note
