"""The wire format decodes plain data only, and shared views come back as grader memory."""

import json
import socket
import threading

import numpy as np
import pytest
import torch

from grader.worker import wire

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
