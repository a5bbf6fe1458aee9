"""Frames and values between the grader and a worker.

A frame is a header, a JSON document and raw byte buffers on a Unix stream socket. File
descriptors of shared-memory segments travel as SCM_RIGHTS data with the header, grader to
worker only.

Values: `encode` turns plain data into a JSON tree plus buffers; `decode` rebuilds plain data and
nothing else: None, bool, int, float, complex, str, bytes, list, tuple, dict, numpy arrays and
scalars of an allowlisted dtype, torch tensors, dtypes and sizes. It never imports or calls
anything the data names, so the worst a hostile worker can send is a wrong value (which a check
then fails) or a malformed one (`WireError`).

Every reply is hostile to the grader, so decoding it has a budget (`REPLY_LIMITS`): bytes of JSON
and of buffers (checked from the frame header, before anything is buffered), JSON nodes (counted
before the JSON is parsed), depth, dict keys that are not strings (hashes an attacker can make
collide: a quadratic dict) and a deadline. A reply over budget raises `TooLarge`; a deadline that
passes while decoding raises `Overdue`. Strings come out as valid UTF-8 (a JSON `\ud800` escape
becomes U+FFFD), so nothing decoded can stop the grader from writing its results.

Shared segments make memory identity observable from the grader: an array argument that lives
in a segment the grader created arrives in the worker as a view of the same memory, and a result
that lies in such a segment comes back as a view (segment, offset, strides) which the grader
rebuilds on *its own* mapping. `np.shares_memory` and the values read afterwards are then
computed by the grader on memory it owns, not reported by the worker.
"""

from __future__ import annotations

import array
import fcntl
import gc
import json
import math
import mmap
import os
import select
import socket
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import torch

from grader.worker.text import valid_text

MAGIC = b"TGW1"
HEADER = struct.Struct("!4sII")  # magic, JSON length, number of buffers
MAX_FDS = 64
ARENA_BYTES = 16 << 20  # sparse: pages cost memory only once written

NUMPY_DTYPES = {
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128",
}
TORCH_DTYPES = {
    "bool": torch.bool, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
    "int64": torch.int64, "uint8": torch.uint8, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64,
    "complex64": torch.complex64, "complex128": torch.complex128,
}


class WireError(Exception):
    """A frame or value that breaks the format (from a hostile or broken peer)."""


# Python writes and reads no integer of more than 4,300 digits as text (its guard against slow
# conversions): a student's larger int would fail the encoding; said as too large instead.
MAX_INT_BITS = 14_000


class NotPlainData(WireError):
    """A value of a type that may not cross the boundary; the message names the type."""


class TooLarge(WireError):
    """A frame or value over its budget; the message says which and the limit."""


class Overdue(WireError):
    """The deadline passed while a value was being decoded."""


@dataclass(frozen=True)
class Limits:
    """Budget of one frame: JSON bytes, buffers (count and bytes), nesting depth, values,
    dict keys that are not strings, and the logical size of an array view."""

    max_json: int = 64 << 20
    max_buffers: int = 100_000
    max_bytes: int = 256 << 20
    max_depth: int = 64
    max_nodes: int = 10_000_000
    max_other_keys: int = 1_000_000


DEFAULT_LIMITS = Limits()
# What the grader accepts from a worker. The largest replies the checks get from honest code
# (measured over a full grading of every solution, 549 replies) hold 20 KB of JSON, 1,766 JSON
# values, 32 buffers of 8 MB in all, depth 19 and 5 dict keys that are not strings (an
# optimizer's state); each limit is 10x that or more (a value costs ~0.6 us to decode). Worst cost
# of a reply at these limits: see tests/test_hostile_decode.py.
REPLY_LIMITS = Limits(max_json=4 << 20, max_buffers=4096, max_bytes=80 << 20, max_depth=64,
                      max_nodes=100_000, max_other_keys=1000)


# --------------------------------------------------------------------------- shared segments


@dataclass
class Segment:
    """One memfd segment. `base` is the memory arrays live in: on the worker's side the shared
    mapping itself; on the grader's side a private mirror (`shm` is then the shared mapping),
    so that nothing the worker does, during a call or after it, can change what the grader
    reads (see `SegmentTable`)."""

    id: int
    fd: int
    size: int
    mm: mmap.mmap
    base: np.ndarray  # uint8 over the whole mapping; keeps `mm` exported while arrays use it
    shm: np.ndarray | None = None  # grader side: uint8 over the shared memfd mapping
    used: int = 0  # grader side: bytes given out from the start of the segment

    @property
    def addr(self) -> int:
        return int(self.base.ctypes.data)


@dataclass
class Allocation:
    """A range of a grader segment that `shared_copy` gave out: one shared argument.

    `may_change`: a call may write into it (the check reads what it holds afterwards and judges
    that itself); otherwise any change made by the worker is reported by `settle`."""

    seg: int
    offset: int
    nbytes: int
    dtype: np.dtype
    shape: tuple[int, ...]
    name: str | None = None
    may_change: bool = False

    def bounds(self, table: SegmentTable) -> tuple[int, int]:
        """The allocation's address range in the grader's memory."""
        lo = table.segments[self.seg].addr + self.offset
        return lo, lo + self.nbytes

    def first_change(self, table: SegmentTable) -> tuple[tuple[int, ...], Any, Any] | None:
        """(index, value before, value in shared memory now) of the first element whose bytes
        differ between the grader's copy and the shared memory; None if none does."""
        seg = table.segments[self.seg]
        if seg.shm is None or not self.nbytes:
            return None
        size = self.dtype.itemsize
        rows = (-1, size)
        before = seg.base[self.offset:self.offset + self.nbytes].reshape(rows)
        now = seg.shm[self.offset:self.offset + self.nbytes].copy().reshape(rows)
        differs = (before != now).any(axis=1)
        if not differs.any():
            return None
        flat = int(np.argmax(differs))
        index = tuple(int(i) for i in np.unravel_index(flat, self.shape)) if self.shape else ()
        return (index, before[flat].view(self.dtype)[0].item(),
                now[flat].view(self.dtype)[0].item())


SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


@dataclass
class SegmentTable:
    """Shared-memory segments one side has mapped, found by address range.

    On the grader's side every segment is a sealed memfd (it can neither shrink, which would
    make the grader's reads die of SIGBUS, nor grow) and arrays live in a private mirror of it:
    `publish()` copies the mirror into the shared memory just before a request, `settle()`
    copies back what the worker left there once the reply is in, one snapshot per call. Between
    calls the grader reads only its own memory, so a thread or process of the student's that
    keeps writing after a call returned cannot change a value the grader reads (or make reading
    crash); each allocation's state before the call is the private copy `settle` compares with.
    """

    segments: dict[int, Segment] = field(default_factory=dict)
    allocations: list[Allocation] = field(default_factory=list)
    _next_id: int = 1
    _arena: Segment | None = None

    def create(self, nbytes: int) -> Segment:
        """Grader side: a new zero-filled, sealed memfd segment of at least `nbytes`, with a
        private mirror."""
        size = max(int(nbytes), 1)
        fd = os.memfd_create(f"torchgrade-seg{self._next_id}",
                             os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, size)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)
            shm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            mirror = mmap.mmap(-1, size, mmap.MAP_PRIVATE, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        seg = Segment(self._next_id, fd, size, mirror, np.frombuffer(mirror, dtype=np.uint8),
                      shm=np.frombuffer(shm, dtype=np.uint8))
        self.segments[seg.id] = seg
        self._next_id += 1
        return seg

    def adopt(self, seg_id: int, fd: int, size: int) -> Segment:
        """Worker side: map a segment the grader sent (replacing an older one with that id)."""
        old = self.segments.get(seg_id)
        if old is not None and old.fd != fd:
            os.close(old.fd)
        return self._map(seg_id, fd, size)

    def _map(self, seg_id: int, fd: int, size: int) -> Segment:
        mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        seg = Segment(seg_id, fd, size, mm, np.frombuffer(mm, dtype=np.uint8))
        self.segments[seg_id] = seg
        return seg

    def locate(self, lo: int, hi: int) -> Segment | None:
        for seg in self.segments.values():
            if seg.addr <= lo and hi <= seg.addr + seg.size:
                return seg
        return None

    def view(self, seg_id: int, dtype: np.dtype, shape, strides, offset: int) -> np.ndarray:
        """An array over segment `seg_id`. On the grader's side it must lie within one
        allocation: memory the grader gave out and compares after every call."""
        seg = self.segments.get(seg_id)
        if seg is None:
            raise WireError(f"view of unknown segment {seg_id}")
        try:
            arr = np.ndarray(tuple(shape), dtype=dtype, buffer=seg.base, offset=offset,
                             strides=tuple(strides))
        except (TypeError, ValueError) as exc:
            raise WireError(f"view outside its segment: {exc}") from None
        if seg.shm is not None and arr.size:
            # Stride 0 lets a few bytes present any number of elements: no more than a buffer
            # of the reply may hold, or the grader's first comparison would exhaust its memory.
            if arr.nbytes > DEFAULT_LIMITS.max_bytes:
                raise WireError(f"a shared view of more than {DEFAULT_LIMITS.max_bytes >> 20} MB")
            lo, hi = _byte_bounds(int(arr.ctypes.data), arr.shape, arr.strides, arr.itemsize)
            if not any(a.seg == seg_id and a.bounds(self)[0] <= lo and hi <= a.bounds(self)[1]
                       for a in self.allocations):
                raise WireError("view outside the arrays the grader shared")
        return arr

    def shared_copy(self, value: np.ndarray, *, name: str | None = None,
                    may_change: bool = False) -> np.ndarray:
        """A C-ordered copy of `value` in shared memory; views of it are shared too.

        Small copies are packed into one segment (a bump allocator) so that a check with
        hundreds of cases does not hold hundreds of file descriptors. `name` and `may_change`
        describe the allocation (see `Allocation`).
        """
        value = np.asarray(value)
        need = max(value.nbytes, 1)
        seg = self._arena
        if seg is None or seg.used + need > seg.size:
            seg = self._arena = self.create(max(need, ARENA_BYTES))
        offset = seg.used
        seg.used = offset + (need + 63) // 64 * 64
        out = np.ndarray(value.shape, dtype=value.dtype, buffer=seg.base, offset=offset)
        out[...] = value
        self.allocations.append(Allocation(seg.id, offset, value.nbytes, value.dtype,
                                           value.shape, name, may_change))
        return out

    def publish(self) -> None:
        """Grader side, before a request: the shared memory holds what the grader's mirror
        holds (whatever a worker wrote there since the last call is overwritten)."""
        for seg in self.segments.values():
            if seg.shm is not None and seg.used:
                seg.shm[:seg.used] = seg.base[:seg.used]

    def settle(self) -> list[Allocation]:
        """Grader side, once a reply is in (or the worker is gone): take one snapshot of the
        shared memory and copy into the mirror what the worker wrote into allocations that may
        change. Returns the allocations that changed although they may not; the mirror keeps
        their state from before the call."""
        changed = []
        for seg in self.segments.values():
            if seg.shm is None or not seg.used:
                continue
            after = seg.shm[:seg.used].copy()
            if np.array_equal(after, seg.base[:seg.used]):
                continue  # the common case, in one comparison
            for a in self.allocations:
                if a.seg != seg.id or not a.nbytes:
                    continue
                now, before = after[a.offset:a.offset + a.nbytes], \
                    seg.base[a.offset:a.offset + a.nbytes]
                if np.array_equal(now, before):
                    continue
                if a.may_change:
                    before[...] = now
                else:
                    changed.append(a)
        return changed

    def close(self) -> None:
        for seg in self.segments.values():
            os.close(seg.fd)
        self.segments.clear()
        self.allocations.clear()
        self._arena = None


def _byte_bounds(addr: int, shape, strides, itemsize: int) -> tuple[int, int]:
    lo = hi = addr
    for n, s in zip(shape, strides):
        if s < 0:
            lo += s * (n - 1)
        else:
            hi += s * (n - 1)
    return lo, hi + itemsize


# --------------------------------------------------------------------------- values


@dataclass
class Encoded:
    doc: dict
    buffers: list = field(default_factory=list)
    fds: list[int] = field(default_factory=list)


class _Encoder:
    def __init__(self, table: SegmentTable | None, send_fds: bool, limits: Limits):
        self.table = table
        self.send_fds = send_fds
        self.limits = limits
        self.buffers: list = []
        self.nbytes = 0
        self.segs: dict[int, dict] = {}
        self.fds: list[int] = []

    def buffer(self, data) -> int:
        self.nbytes += len(data)
        if self.nbytes > self.limits.max_bytes or len(self.buffers) >= self.limits.max_buffers:
            raise NotPlainData(f"a value larger than {self.limits.max_bytes >> 20} MB")
        self.buffers.append(data)
        return len(self.buffers) - 1

    def shared_view(self, addr: int, shape, byte_strides, itemsize: int, count: int):
        if self.table is None or count == 0:
            return None
        lo, hi = _byte_bounds(addr, shape, byte_strides, itemsize)
        seg = self.table.locate(lo, hi)
        if seg is None:
            return None
        if self.send_fds and seg.id not in self.segs:
            if len(self.fds) >= MAX_FDS:
                return None
            self.segs[seg.id] = {"id": seg.id, "size": seg.size, "fd": len(self.fds)}
            self.fds.append(seg.fd)
        return {"seg": seg.id, "offset": addr - seg.addr, "strides": list(byte_strides)}

    def value(self, x: Any, depth: int = 0):
        if depth > self.limits.max_depth:
            raise NotPlainData(f"a value nested more than {self.limits.max_depth} levels deep")
        t = type(x)
        if t is int and x.bit_length() > MAX_INT_BITS:
            raise NotPlainData(f"an integer of {x.bit_length()} bits, larger than the "
                               f"{MAX_INT_BITS} bits a value may have")
        if x is None or t is bool or t is int or t is str:
            return x
        if t is float:
            return x
        if t is complex:
            return {"$": "complex", "re": x.real, "im": x.imag}
        if t is bytes or t is bytearray:
            return {"$": "bytes", "buf": self.buffer(bytes(x))}
        if t is list:
            return [self.value(v, depth + 1) for v in x]
        if t is tuple:
            return {"$": "tuple", "items": [self.value(v, depth + 1) for v in x]}
        if t is dict:
            return {"$": "dict",
                    "items": [[self.value(k, depth + 1), self.value(v, depth + 1)]
                              for k, v in x.items()]}
        if t is np.ndarray:
            return self.ndarray(x)
        if isinstance(x, np.generic) and t.__module__ == "numpy":
            name = x.dtype.name
            if name not in NUMPY_DTYPES:
                raise NotPlainData(f"a numpy scalar of dtype {name}, which is not supported")
            return {"$": "npscalar", "dtype": name, "buf": self.buffer(x.tobytes())}
        if t is torch.Tensor or t is torch.nn.Parameter:
            return self.tensor(x)
        if t is torch.Size:
            return {"$": "size", "items": [int(v) for v in x]}
        if t is torch.dtype:
            return {"$": "dtype", "lib": "torch", "name": str(x).removeprefix("torch.")}
        if isinstance(x, np.dtype) and x.name in NUMPY_DTYPES:
            return {"$": "dtype", "lib": "numpy", "name": x.name}
        raise NotPlainData(f"an object of type {describe_type(x)}, which is not plain data")

    def ndarray(self, a: np.ndarray):
        name = a.dtype.name
        if name not in NUMPY_DTYPES or not a.dtype.isnative:
            raise NotPlainData(f"a numpy array of dtype {a.dtype}, which is not supported")
        node = {"$": "ndarray", "dtype": name, "shape": list(a.shape),
                "writeable": bool(a.flags.writeable)}
        view = self.shared_view(int(a.ctypes.data), a.shape, a.strides, a.itemsize, a.size)
        if view is not None:
            node["view"] = view
        else:
            node["buf"] = self.buffer(np.ascontiguousarray(a).tobytes())
        return node

    def tensor(self, t: torch.Tensor):
        if t.layout != torch.strided or t.device.type != "cpu" or t.is_quantized:
            raise NotPlainData(f"a {t.layout} tensor on {t.device}, which is not supported "
                               "(return a dense CPU tensor)")
        name = str(t.dtype).removeprefix("torch.")
        if name not in TORCH_DTYPES:
            raise NotPlainData(f"a tensor of dtype {t.dtype}, which is not supported")
        node = {"$": "tensor", "dtype": name, "shape": list(t.shape),
                "requires_grad": bool(t.requires_grad),
                "parameter": type(t) is torch.nn.Parameter}
        esize = t.element_size()
        view = None
        if name in NUMPY_DTYPES and not t.is_conj() and not t.is_neg():
            view = self.shared_view(int(t.data_ptr()), t.shape, [s * esize for s in t.stride()],
                                    esize, t.numel())
        if view is not None:
            node["view"] = view
        else:
            flat = t.detach().resolve_conj().resolve_neg().contiguous().reshape(-1)
            if name == "bfloat16":
                flat = flat.view(torch.int16)
            node["buf"] = self.buffer(flat.numpy().tobytes())
        return node


def describe_type(x: Any) -> str:
    t = type(x)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def encode(value: Any, table: SegmentTable | None = None, *, send_fds: bool = False,
           limits: Limits = DEFAULT_LIMITS) -> Encoded:
    enc = _Encoder(table, send_fds, limits)
    tree = enc.value(value)
    return Encoded({"v": tree, "segs": list(enc.segs.values())}, enc.buffers, enc.fds)


class _Decoder:
    """Rebuilds one value within `limits` and `deadline` (a `time.monotonic()` value)."""

    CLOCK_EVERY = 4096  # values decoded between two looks at the clock

    def __init__(self, buffers: list, table: SegmentTable | None, limits: Limits,
                 deadline: float | None = None):
        self.buffers = buffers
        self.table = table
        self.limits = limits
        self.deadline = deadline
        self.max_depth, self.max_nodes = limits.max_depth, limits.max_nodes
        self.nodes = 0
        self.other_keys = 0

    def over(self, depth: int) -> None:
        """Raise for the limit `value` found crossed (the value count, the depth or the
        deadline, looked at every `CLOCK_EVERY` values)."""
        if depth > self.limits.max_depth:
            raise TooLarge(f"values nested too deeply (limit {self.limits.max_depth})")
        if self.nodes > self.limits.max_nodes:
            raise TooLarge(f"too many values (limit {self.limits.max_nodes:,})")
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise Overdue("the deadline passed while the reply was decoded")

    def buf(self, node, expected: int | None = None) -> bytes:
        i = node.get("buf")
        if type(i) is not int or not 0 <= i < len(self.buffers):
            raise WireError("bad buffer reference")
        data = self.buffers[i]
        if expected is not None and len(data) != expected:
            raise WireError(f"buffer of {len(data)} bytes where {expected} were announced")
        return data

    def shape(self, node, itemsize: int) -> tuple[int, ...]:
        """The node's shape; its size in bytes (exact, not wrapped as int64) within the
        budget, whether its data travels as a buffer or as a view of shared memory."""
        shape = node.get("shape")
        if type(shape) is not list or len(shape) > 32 or any(
                type(n) is not int or n < 0 for n in shape):
            raise WireError("bad shape")
        if math.prod(shape) * itemsize > self.limits.max_bytes:
            raise TooLarge(f"an array of shape {tuple(shape)} "
                           f"(limit {self.limits.max_bytes >> 20} MB)")
        return tuple(shape)

    def value(self, x, depth: int = 0):
        self.nodes += 1
        if depth > self.max_depth or self.nodes > self.max_nodes or not (
                self.nodes % self.CLOCK_EVERY):
            self.over(depth)
        t = type(x)
        if t is str:
            return valid_text(x)
        if x is None or t in (bool, int, float):
            return x
        if t is list:
            return [self.value(v, depth + 1) for v in x]
        if t is not dict:
            raise WireError(f"unexpected JSON {t.__name__}")
        kind = x.get("$")
        if kind == "tuple":
            return tuple(self.value(v, depth + 1) for v in x["items"])
        if kind == "dict":
            return self.dict(x["items"], depth)
        if kind == "complex":
            return complex(float(x["re"]), float(x["im"]))
        if kind == "bytes":
            return bytes(self.buf(x))
        if kind == "ndarray":
            return self.ndarray(x)
        if kind == "npscalar":
            dtype = self.np_dtype(x)
            return np.frombuffer(self.buf(x, dtype.itemsize), dtype=dtype)[0]
        if kind == "tensor":
            return self.tensor(x)
        if kind == "size":
            items = x["items"]
            if type(items) is not list or len(items) > 32:
                raise WireError("bad size")
            return torch.Size(int(v) for v in items)
        if kind == "dtype":
            if x.get("lib") == "torch" and x.get("name") in TORCH_DTYPES:
                return TORCH_DTYPES[x["name"]]
            if x.get("lib") == "numpy" and x.get("name") in NUMPY_DTYPES:
                return np.dtype(x["name"])
            raise WireError("unknown dtype")
        raise WireError(f"unknown value kind {kind!r}")

    def dict(self, items, depth: int) -> dict:
        """Keys other than str hash alike at will (multiples of sys.hash_info.modulus, say)
        and make building a dict quadratic: a reply may hold only a few of them. str hashes
        are salted per process."""
        if type(items) is not list:
            raise WireError("bad dict items")
        out = {}
        for pair in items:
            if type(pair) is not list or len(pair) != 2:
                raise WireError("bad dict item")
            key = self.value(pair[0], depth + 1)
            if type(key) is not str:
                self.other_keys += 1
                if self.other_keys > self.limits.max_other_keys:
                    raise TooLarge(f"too many dict keys that are not strings "
                                   f"(limit {self.limits.max_other_keys:,})")
            try:
                out[key] = self.value(pair[1], depth + 1)
            except TypeError:
                raise WireError("unhashable dict key") from None
        return out

    def np_dtype(self, node) -> np.dtype:
        name = node.get("dtype")
        if name not in NUMPY_DTYPES:
            raise WireError(f"dtype {name!r} not allowed")
        return np.dtype(name)

    def view(self, node, dtype: np.dtype, shape) -> np.ndarray:
        v = node["view"]
        if self.table is None or type(v) is not dict:
            raise WireError("unexpected shared view")
        strides = v.get("strides")
        if type(strides) is not list or len(strides) != len(shape) or any(
                type(s) is not int for s in strides) or type(v.get("offset")) is not int:
            raise WireError("bad view")
        # Any id the sender wrote: the table refuses one it did not give out (None included).
        seg = cast(int, v.get("seg"))
        return self.table.view(seg, dtype, shape, strides, v["offset"])

    def ndarray(self, node) -> np.ndarray:
        dtype = self.np_dtype(node)
        shape = self.shape(node, dtype.itemsize)
        if "view" in node:
            arr = self.view(node, dtype, shape)
        else:
            data = self.buf(node, math.prod(shape) * dtype.itemsize)
            arr = np.frombuffer(bytearray(data), dtype=dtype).reshape(shape)
        if node.get("writeable") is False:
            arr.flags.writeable = False
        return arr

    def tensor(self, node) -> torch.Tensor:
        name = node.get("dtype")
        if name not in TORCH_DTYPES:
            raise WireError(f"tensor dtype {name!r} not allowed")
        dtype = TORCH_DTYPES[name]
        esize = torch.empty((), dtype=dtype).element_size()
        shape = self.shape(node, esize)
        if "view" in node:
            if name not in NUMPY_DTYPES:
                raise WireError("bad tensor view")
            arr = self.view(node, np.dtype(name), shape)
            if any(s < 0 for s in arr.strides):
                raise WireError("tensor view with a negative stride")
            t = torch.from_numpy(arr)
        else:
            count = math.prod(shape)
            data = self.buf(node, count * esize)
            if count == 0:
                t = torch.empty(shape, dtype=dtype)
            elif name == "bfloat16":
                t = torch.frombuffer(bytearray(data), dtype=torch.int16).view(dtype).reshape(shape)
            else:
                t = torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape)
        grad = node.get("requires_grad") is True and (t.is_floating_point() or t.is_complex())
        if node.get("parameter") is True:
            return torch.nn.Parameter(t, requires_grad=grad)
        return t.requires_grad_(grad) if grad else t


def decode(doc: dict, buffers: list, table: SegmentTable | None = None, fds: Sequence[int] = (),
           *, limits: Limits = DEFAULT_LIMITS, deadline: float | None = None) -> Any:
    """Rebuild a value from `encode`'s output; adopts the segments whose fds came with it.

    Raises `TooLarge` past `limits`, `Overdue` past `deadline` (a `time.monotonic()` value)
    and `WireError` for anything else malformed: whatever the document holds, nothing else.
    """
    try:
        if type(doc) is not dict:
            raise WireError("frame is not a JSON object")
        segs = doc.get("segs", [])
        if segs and (table is None or not fds):
            raise WireError("segments where none may be sent")
        for spec in segs:
            assert table is not None  # checked above: segments come with a table
            table.adopt(int(spec["id"]), fds[int(spec["fd"])], int(spec["size"]))
        with _no_gc():
            return _Decoder(buffers, table, limits, deadline).value(doc.get("v"))
    except WireError:
        raise
    except RecursionError:
        raise TooLarge(f"values nested too deeply (limit {limits.max_depth})") from None
    except Exception as exc:  # noqa: BLE001 - whatever a hostile document makes our code raise
        raise WireError(f"malformed value: {type(exc).__name__}: {exc}"[:500]) from None


class _no_gc:
    """The cyclic garbage collector paused: JSON and decoded values hold no cycles, and
    with it running, building 100,000 containers costs ~10x more."""

    def __enter__(self):
        self.was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc):
        if self.was:
            gc.enable()


def parse_json(data, limits: Limits = DEFAULT_LIMITS) -> Any:
    """`json.loads` of a frame's document within the budget: the values it may hold are
    counted (a `[`, `{` or `,` each) before any is built, because a few MB of `[],[],...`
    cost json.loads ~20x their size in memory, and surrogate escapes become U+FFFD later
    (`decode`)."""
    data = bytes(data)
    if len(data) > limits.max_json:
        raise TooLarge(f"{len(data):,} bytes of JSON (limit {limits.max_json >> 20} MB)")
    values = data.count(b"[") + data.count(b"{") + data.count(b",")
    if values > limits.max_nodes:
        raise TooLarge(f"about {values:,} values (limit {limits.max_nodes:,})")
    try:
        with _no_gc():
            return json.loads(data)
    except RecursionError:
        raise TooLarge(f"values nested too deeply (limit {limits.max_depth})") from None
    except ValueError as exc:
        raise WireError(f"malformed JSON: {exc}"[:500]) from None


# --------------------------------------------------------------------------- frames


def _frame_header(encoded: Encoded) -> tuple[bytes, bytes]:
    doc = json.dumps(encoded.doc, separators=(",", ":")).encode()
    lengths = struct.pack(f"!{len(encoded.buffers)}Q", *(len(b) for b in encoded.buffers))
    return HEADER.pack(MAGIC, len(doc), len(encoded.buffers)) + lengths, doc


def send_frame(sock: socket.socket, encoded: Encoded) -> None:
    """Blocking send (the worker's side)."""
    head, doc = _frame_header(encoded)
    anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", encoded.fds))] \
        if encoded.fds else []
    sent = sock.sendmsg([head], anc)
    if sent < len(head):
        sock.sendall(head[sent:])
    sock.sendall(doc)
    for b in encoded.buffers:
        sock.sendall(b)


def _recv_exact(sock: socket.socket, n: int) -> bytearray:
    data = bytearray(n)
    view = memoryview(data)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            raise EOFError("peer closed the connection")
        got += k
    return data


def recv_frame(sock: socket.socket, limits: Limits = DEFAULT_LIMITS) -> tuple[dict, list, list]:
    """Blocking receive (the worker's side): returns (doc, buffers, fds)."""
    head = bytearray()
    fds: list[int] = []
    while len(head) < HEADER.size:
        data, anc, _flags, _ = sock.recvmsg(HEADER.size - len(head),
                                            socket.CMSG_SPACE(MAX_FDS * 4))
        if not data:
            raise EOFError("peer closed the connection")
        head += data
        fds += fds_from(anc)
    magic, doc_len, nbuf = HEADER.unpack(head)
    if magic != MAGIC or doc_len > limits.max_json or nbuf > limits.max_buffers:
        raise WireError("bad frame header")
    lengths = struct.unpack(f"!{nbuf}Q", _recv_exact(sock, 8 * nbuf))
    if sum(lengths) > limits.max_bytes:
        raise WireError("frame too large")
    doc = parse_json(_recv_exact(sock, doc_len), limits)
    return doc, [bytes(_recv_exact(sock, n)) for n in lengths], fds


def fds_from(anc) -> list[int]:
    fds: list[int] = []
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            arr = array.array("i")
            arr.frombytes(data[: len(data) - len(data) % arr.itemsize])
            fds += arr.tolist()
    return fds


class FrameReader:
    """Incremental, non-blocking frame parser for the grader's side.

    `feed` takes whatever the socket had; `frame()` returns a complete frame or None. Limits are
    enforced from the header on, before the payload is buffered, so a hostile worker cannot make
    the grader hold more than one frame within `limits` (`TooLarge` otherwise), and the JSON
    is counted before it is parsed (`parse_json`).
    """

    def __init__(self, limits: Limits = DEFAULT_LIMITS):
        self.limits = limits
        self.data = bytearray()
        self._need: tuple[int, int, tuple[int, ...]] | None = None

    def feed(self, chunk: bytes) -> None:
        self.data += chunk
        limit = self._need_total() if self._need is not None else (
            HEADER.size + 8 * self.limits.max_buffers + self.limits.max_json
            + self.limits.max_bytes)
        if len(self.data) > limit + (1 << 20):
            raise TooLarge(f"more bytes than its frame announced (limit "
                           f"{limit >> 20} MB)")

    def _need_total(self) -> int:
        assert self._need is not None  # called once a header announced the frame
        start, doc_len, lengths = self._need
        return start + doc_len + sum(lengths)

    def frame(self) -> tuple[dict, list] | None:
        if self._need is None:
            if len(self.data) < HEADER.size:
                return None
            magic, doc_len, nbuf = HEADER.unpack_from(self.data)
            if magic != MAGIC:
                raise WireError("bad frame header from worker")
            if doc_len > self.limits.max_json:
                raise TooLarge(f"{doc_len:,} bytes of JSON "
                               f"(limit {self.limits.max_json >> 20} MB)")
            if nbuf > self.limits.max_buffers:
                raise TooLarge(f"{nbuf:,} buffers (limit {self.limits.max_buffers:,})")
            if len(self.data) < HEADER.size + 8 * nbuf:
                return None
            lengths = struct.unpack_from(f"!{nbuf}Q", self.data, HEADER.size)
            if sum(lengths) > self.limits.max_bytes:
                raise TooLarge(f"{sum(lengths) >> 20:,} MB of arrays and bytes "
                               f"(limit {self.limits.max_bytes >> 20} MB)")
            self._need = (HEADER.size + 8 * nbuf, doc_len, lengths)
        start, doc_len, lengths = self._need
        end = self._need_total()
        if len(self.data) < end:
            return None
        data, self.data, self._need = self.data, bytearray(self.data[end:]), None
        view = memoryview(data)
        doc = parse_json(view[start:start + doc_len], self.limits)
        pos, buffers = start + doc_len, []
        for n in lengths:  # one copy each; the frame's bytes go when this returns
            buffers.append(bytes(view[pos:pos + n]))
            pos += n
        return doc, buffers


def send_frame_nonblocking(sock: socket.socket, encoded: Encoded, deadline: float,
                           on_idle=None) -> bool:
    """Send a frame without blocking past `deadline`; False on timeout.

    `on_idle(timeout)` is called while the socket is not writable (to drain worker output).
    """
    head, doc = _frame_header(encoded)
    chunks = [memoryview(head), memoryview(doc)] + [memoryview(b) for b in encoded.buffers]
    anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", encoded.fds))] \
        if encoded.fds else []
    first = True
    for chunk in chunks:
        while len(chunk):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            _, writable, _ = select.select([], [sock], [], min(remaining, 0.05))
            if not writable:
                if on_idle is not None:
                    on_idle(0)
                continue
            try:
                sent = sock.sendmsg([chunk], anc) if first else sock.send(chunk)
            except BlockingIOError:
                continue
            first = False
            chunk = chunk[sent:]
    return True
