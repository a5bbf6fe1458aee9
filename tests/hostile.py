"""An adversarial corpus: one submission per threat, with the verdicts each must get.

Every hostile submission is the reference solution of `strides_broadcasting` with a hostile
twist: code run at import time (`at_import`), a function replaced (`replace`), or a file that is
not Python at all (`files`). Placeholders in the code (`{out}`, `{victim}`, `{solutions}`,
`{port}`, `{marker}`) are filled in when the corpus is written to disk.

Safe on a machine without isolation: every loop, allocation and process count is bounded, so a
broken sandbox shows up as a failed test, not a dead machine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

EXERCISE = "strides_broadcasting"


@dataclass(frozen=True)
class Threat:
    name: str
    at_import: str = ""
    replace: str = ""  # code appended after the solution: it redefines one function
    target: str = ""  # that function: its checks get `status`, all others pass
    status: str = "passed"
    files: dict[str, bytes] = field(default_factory=dict)  # instead of the solution
    all_checks: str | None = None  # every check gets this status (a broken file)
    words: str = ""  # appears in every non-passing check's message


THREATS = [
    Threat("endless_loop", replace="""
def c_strides(shape, itemsize):
    while True:
        pass
""", target="c_strides", status="timeout", words="timed out"),
    Threat("allocates_50_gb", replace="""
def c_strides(shape, itemsize):
    hoard = np.ones(50 * 2**30 // 8)
    return tuple(hoard[:len(shape)])
""", target="c_strides", status="crashed", words="memory"),
    Threat("os_exit", replace="""
def transpose_view(a):
    import os
    os._exit(0)
""", target="transpose_view", status="crashed", words="exited"),
    Threat("segfault_via_ctypes", replace="""
def transpose_view(a):
    import ctypes
    return ctypes.string_at(0)
""", target="transpose_view", status="crashed", words="segmentation fault"),
    Threat("monkeypatches_numpy_and_torch", at_import="""
np.allclose = lambda *a, **k: True
np.array_equal = lambda *a, **k: True
np.testing.assert_allclose = lambda *a, **k: None
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
""", replace="""
def center_columns(x):
    x -= x.mean()  # wrong twice: one mean for all columns, and written into x
    return x
""", target="center_columns", status="failed"),
    Threat("always_equal_object", replace="""
class _Anything(tuple):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = tuple.__hash__


def c_strides(shape, itemsize):
    return _Anything((0,) * len(shape))
""", target="c_strides", status="error", words="not plain data"),
    Threat("writes_fake_results", at_import="""
import json as _json
import os as _os
_fake = _json.dumps({{"student": "victim", "score": 999, "max_score": 1, "checks": []}})
for _path in ["{out}/victim/results.json", "{out}/writes_fake_results/results.json",
              "{out}/index.html", "{out}/grades.csv", "results.json", "../results.json"]:
    try:
        _os.makedirs(_os.path.dirname(_path) or ".", exist_ok=True)
        with open(_path, "w") as _f:
            _f.write(_fake)
    except OSError:
        pass
"""),
    Threat("reads_the_solution_and_other_students", replace="""
def c_strides(shape, itemsize):
    import importlib.util
    for path in ["{solutions}", "{victim}/strides_broadcasting.py"]:
        try:
            spec = importlib.util.spec_from_file_location("stolen", path)
            stolen = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(stolen)
            return stolen.c_strides(shape, itemsize)
        except Exception:
            pass
    return (0,) * len(shape)
""", target="c_strides", status="failed"),
    Threat("opens_a_socket", at_import="""
import socket as _socket
for _host in ("127.0.0.1", "localhost", "::1"):
    try:
        _socket.create_connection((_host, {port}), timeout=1).sendall(b"stolen answers")
    except OSError:
        pass
"""),
    Threat("spawns_processes_that_outlive_it", at_import="""
import os as _os
import subprocess as _subprocess
_subprocess.Popen(["sleep", "{marker}"], start_new_session=True)
if _os.fork() == 0:
    _os.setsid()
    if _os.fork() == 0:
        _subprocess.Popen(["sleep", "{marker}"])
    _os._exit(0)
"""),
    Threat("fork_bomb_bounded", at_import="""
import subprocess as _subprocess
_children = []
for _ in range(300):
    try:
        _children.append(_subprocess.Popen(["sleep", "{marker}"]))
    except OSError:
        break
"""),
    Threat("kills_its_parent", at_import="""
import os as _os
import signal as _signal
try:
    _os.kill(_os.getppid(), _signal.SIGKILL)
except OSError:
    pass
"""),
    Threat("prints_300_mb", at_import="""
import sys as _sys
_chunk = "all work and no play " * 50000 + "\\n"
for _ in range(300):
    _sys.stdout.write(_chunk)
"""),
    Threat("writes_a_huge_file", at_import="""
try:
    with open("huge.bin", "wb") as _f:
        for _ in range(40):
            _f.write(b"x" * 2**22)
except OSError:
    pass
"""),
    Threat("fills_the_disk", at_import="""
for _i in range(100):
    try:
        with open(f"filler{{_i}}.bin", "wb") as _f:
            _f.write(b"x" * (8 << 20))
    except OSError:
        break
"""),
    Threat("notebook_not_json", files={f"{EXERCISE}.ipynb": b"{ this is not json"},
           all_checks="error", words="not valid JSON"),
    Threat("binary_file", files={f"{EXERCISE}.py": bytes(range(256)) * 4},
           all_checks="error", words="binary"),
    Threat("imports_a_missing_package", at_import="import no_such_package_for_torchgrade\n",
           all_checks="error", words="ModuleNotFoundError"),
    Threat("sys_exit_at_import", at_import="import sys as _sys\n_sys.exit(0)\n",
           all_checks="error", words="sys.exit(0)"),
]
