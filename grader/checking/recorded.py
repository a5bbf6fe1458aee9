"""Reference values recorded for the visible checks, replayed in a student release.

Some visible checks compare a submission with a grader-side reference implementation: a module
`checks/<name>_reference.py` (e.g. a reference module that runs a training loop
the contract describes). Shipping it would hand out the answer. So `torchgrade release` runs the
visible checks against the reference solutions with every public function of those modules
wrapped by a recorder (`grader.release.replay`), and ships what each call returned, keyed
by a digest of its arguments, as JSON: `checks/recorded/<name>_reference.json` of the released
course. There, `install(checks_dir)` (called before a session imports the checks) makes `import
<name>_reference` give a stand-in whose functions look the digest up and decode the value.
Only calls made by visible checks are recorded, so no value a hidden check uses is shipped.

The grader and the workers run torch single-threaded on seeded cases, so a recorded value is
the one the reference computes at grading, bit for bit (arrays and tensors travel as raw bytes,
floats exactly). A call whose arguments were never recorded (say another torch version built
different test data from the same seeds) fails its check with `NotRecorded`, which says so and
that the check runs at grading.

Values: None, bool, int, float (inf and nan too), str, list, tuple, dict, dataclass instances,
numpy arrays and scalars, torch tensors; anything else cannot be recorded and stops the build.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import importlib.abc
import importlib.util
import inspect
import json
import math
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import torch

from grader.checking.student import StudentError

RECORDED_DIR = "recorded"
SUFFIX = "_reference"


class NotRecordable(TypeError):
    """A reference function took or returned a value the recording cannot represent."""


class NotRecorded(StudentError):
    """A replayed reference was called with arguments nobody recorded."""

    def __init__(self, module: str, function: str, recorded_with: dict[str, str]):
        here = f"torch {torch.__version__}, numpy {np.__version__}"
        then = ", ".join(f"{k} {v}" for k, v in recorded_with.items()) or "unknown versions"
        super().__init__(
            f"This check could not run here: it compares with reference values recorded when "
            f"the release was built ({module}.{function}), and this machine built different "
            f"test data from the same seeds ({here}; the release was recorded with {then}). It "
            f"runs when your work is graded; to run it here, install the versions the release "
            f"names (pip install -c constraints.txt ...).", status="error")


# --------------------------------------------------------------------------- digests


def digest(function: str, args: tuple, kwargs: dict) -> str:
    """A digest of a call: the function's name and its arguments' exact values."""
    h = hashlib.sha256(function.encode())
    _feed(h, tuple(args))
    _feed(h, {k: kwargs[k] for k in sorted(kwargs)})
    return h.hexdigest()


def _feed(h, value: Any) -> None:
    def put(tag: str, data: bytes = b"") -> None:
        h.update(tag.encode() + len(data).to_bytes(8, "little") + data)

    if value is None or isinstance(value, (bool, str)):
        put(f"{type(value).__name__}", repr(value).encode())
    elif isinstance(value, int):
        put("int", str(value).encode())
    elif isinstance(value, float):
        put("float", value.hex().encode())
    elif isinstance(value, (list, tuple)):
        put(f"{type(value).__name__}[{len(value)}]")
        for item in value:
            _feed(h, item)
    elif isinstance(value, dict):
        put(f"dict[{len(value)}]")
        for key in sorted(value, key=repr):
            _feed(h, key)
            _feed(h, value[key])
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        put("dataclass", type(value).__name__.encode())
        for f in dataclasses.fields(value):
            put("field", f.name.encode())
            _feed(h, getattr(value, f.name))
    elif isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        put("tensor", f"{t.dtype}{tuple(t.shape)}".encode())
        put("bytes", _tensor_bytes(t))
    elif isinstance(value, (np.ndarray, np.generic)):
        a = np.ascontiguousarray(value)
        put("ndarray", f"{a.dtype.str}{a.shape}".encode())
        put("bytes", a.tobytes())
    elif isinstance(value, (torch.dtype, torch.Size)):
        put(type(value).__name__, str(value).encode())
    else:
        raise NotRecordable(f"a {type(value).__module__}.{type(value).__name__} cannot be "
                            "part of a recorded call")


def _tensor_bytes(t: torch.Tensor) -> bytes:
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


# --------------------------------------------------------------------------- values as JSON


def encode(value: Any, classes: dict[str, list[str]]) -> Any:
    """A JSON-able form of `value`; dataclasses met are noted in `classes` (name: fields)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, list):
        return [encode(v, classes) for v in value]
    if isinstance(value, tuple):
        return {"$tuple": [encode(v, classes) for v in value]}
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: encode(v, classes) for k, v in value.items()}
        return {"$dict": [[encode(k, classes), encode(v, classes)] for k, v in value.items()]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = type(value).__name__
        fields = [f.name for f in dataclasses.fields(value)]
        classes[name] = fields
        return {"$dataclass": name, "fields": {f: encode(getattr(value, f), classes)
                                               for f in fields}}
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        return {"$tensor": {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
                            "data": base64.b64encode(_tensor_bytes(t)).decode("ascii"),
                            "requires_grad": value.requires_grad}}
    if isinstance(value, (np.ndarray, np.generic)):
        a = np.ascontiguousarray(value)
        return {"$ndarray": {"dtype": a.dtype.str, "shape": list(a.shape),
                             "data": base64.b64encode(a.tobytes()).decode("ascii"),
                             "scalar": isinstance(value, np.generic)}}
    raise NotRecordable(f"a {type(value).__module__}.{type(value).__name__} cannot be recorded")


def decode(data: Any, classes: dict[str, type]) -> Any:
    if isinstance(data, list):
        return [decode(v, classes) for v in data]
    if not isinstance(data, dict):
        return data
    if "$float" in data:
        return float(data["$float"])
    if "$tuple" in data:
        return tuple(decode(v, classes) for v in data["$tuple"])
    if "$dict" in data:
        return {_hashable(decode(k, classes)): decode(v, classes) for k, v in data["$dict"]}
    if "$dataclass" in data:
        cls = classes[data["$dataclass"]]
        return cls(**{k: decode(v, classes) for k, v in data["fields"].items()})
    if "$tensor" in data:
        spec = data["$tensor"]
        dtype = getattr(torch, spec["dtype"])
        raw = bytearray(base64.b64decode(spec["data"]))
        if dtype == torch.bfloat16:
            t = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16) if raw else \
                torch.empty(0, dtype=dtype)
        else:
            t = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        t = t.reshape(spec["shape"])
        return t.requires_grad_(True) if spec.get("requires_grad") else t
    if "$ndarray" in data:
        spec = data["$ndarray"]
        a = np.frombuffer(base64.b64decode(spec["data"]), dtype=np.dtype(spec["dtype"]))
        a = a.reshape(spec["shape"]).copy()
        return a[()] if spec.get("scalar") else a
    return {k: decode(v, classes) for k, v in data.items()}


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key


# --------------------------------------------------------------------------- recording


@dataclasses.dataclass
class ModuleRecording:
    module: str
    functions: list[str]
    classes: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    calls: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_json(self, recorded_with: dict[str, str]) -> str:
        return json.dumps({"module": self.module, "recorded_with": recorded_with,
                           "functions": self.functions, "classes": self.classes,
                           "calls": dict(sorted(self.calls.items()))}, allow_nan=False,
                          separators=(",", ":"), sort_keys=False) + "\n"


def public_functions(module: types.ModuleType) -> dict[str, Any]:
    """The functions a reference module defines itself and does not mark private."""
    return {name: fn for name, fn in vars(module).items()
            if inspect.isfunction(fn) and fn.__module__ == module.__name__
            and not name.startswith("_")}


def wrap_for_recording(module: types.ModuleType) -> ModuleRecording:
    """Replace the module's public functions by recorders (before the checks import them)."""
    recording = ModuleRecording(module.__name__, sorted(public_functions(module)))
    for name, fn in public_functions(module).items():
        setattr(module, name, _recorder(recording, name, fn))
    return recording


def _recorder(recording: ModuleRecording, name: str, fn):
    def recorded(*args, **kwargs):
        result = fn(*args, **kwargs)
        key = digest(name, args, kwargs)
        value = encode(result, recording.classes)
        previous = recording.calls.setdefault(key, value)
        if previous != value:
            raise RuntimeError(f"{recording.module}.{name} returned different values for the "
                               "same arguments: it is not deterministic, it cannot be recorded")
        return result

    recorded.__name__ = name
    return recorded


def versions() -> dict[str, str]:
    return {"torch": torch.__version__, "numpy": np.__version__}


# --------------------------------------------------------------------------- replaying


class RecordedModule(types.ModuleType):
    """A reference module's stand-in: its public functions answer from recorded values."""

    def __init__(self, name: str, data: dict):
        super().__init__(name, f"Recorded reference values for the visible checks (the grader-"
                               f"side {name} is not part of the student release).")
        self._recorded_with = data.get("recorded_with", {})
        self._calls = data["calls"]
        self._classes = {cls: dataclasses.make_dataclass(cls, fields)
                         for cls, fields in data.get("classes", {}).items()}
        for cls_name, cls in self._classes.items():
            cls.__module__ = name
            setattr(self, cls_name, cls)
        for function in data["functions"]:
            setattr(self, function, self._replayer(function))

    def _replayer(self, function: str):
        def replayed(*args, **kwargs):
            key = digest(function, args, kwargs)
            if key not in self._calls:
                raise NotRecorded(self.__name__, function, self._recorded_with)
            return decode(self._calls[key], self._classes)

        replayed.__name__ = function
        replayed.__qualname__ = function
        return replayed


class _RecordedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves top-level `<name>` from `folder/<name>.json` (a check helper's plain name)."""

    def __init__(self) -> None:
        self.folder: Path | None = None

    def find_spec(self, fullname, path=None, target=None):
        if self.folder is None or "." in fullname \
                or not (self.folder / f"{fullname}.json").is_file():
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        assert self.folder is not None
        data = json.loads((self.folder / f"{spec.name}.json").read_text(encoding="utf-8"))
        return RecordedModule(spec.name, data)

    def exec_module(self, module):
        pass


_FINDER = _RecordedFinder()


def install(checks_dir: Path) -> None:
    """Serve `import <name>_reference` from `checks_dir/recorded/<name>_reference.json` where no
    such module exists (a student release's checks); in a course with no recorded folder (the
    full course) serve nothing. Called before a session imports the checks of `checks_dir`."""
    folder = checks_dir / RECORDED_DIR
    _FINDER.folder = folder if folder.is_dir() else None
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)
