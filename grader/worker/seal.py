"""Seal the worker's own code before student code runs in it (issue 15, class 7).

Probes (`grader/probes/`) run in the worker, next to student code, and the records they make are
only as good as the probe code that makes them. `seal()` runs in a freshly forked worker before
the student's module is loaded and:

- **resolves** every probe function into a table the worker holds (`Sealed.probes`): a request
  names a probe, and the function that runs is the one found here, never one looked up later
  through a module, `sys.modules` or the `grader` package;
- **hides** the grader's modules: every `grader` entry leaves `sys.modules`, and an import of
  `grader` or `grader.*` from student code raises ImportError (were the finder removed, the
  import would build a fresh copy that nothing of the worker uses);
- **freezes** every class defined in those modules (a hook recorder, the recording loss, the wire
  encoder): setting or deleting one of their attributes raises TypeError, through
  `type.__setattr__` too, and their instances cannot change class;
- **fingerprints** the rest (`Sealed.changed()`): the identity of every module-level name, and
  the code, defaults and closure of every function, of those modules and of their classes. The
  worker compares before and after every probe and refuses a record made by changed probe code.

What this cannot close, stated in docs/operations.md ("Records made in the worker"): student code
runs in the same process, so a submission written to reach into probe state through the object
graph (frames, `gc`, the real dict behind a class's `__dict__`, `ctypes`) and to put everything
back before the call returns can still fake a record. Checks whose verdict rests on such a record
say so in their result (`CheckResult.worker_records`).
"""

from __future__ import annotations

import builtins
import ctypes
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import linecache
import os
import pkgutil
import sys
import types
from collections.abc import Callable, Iterator

PREFIX = "grader"
# The package a course's own probes are imported as (its `probes/` folder): in the worker, where
# they are sealed like the grader's, and in the grader, where its checks import their builders.
COURSE_PROBES = "probes"
PROBES_ENV = "TORCHGRADE_PROBES"  # the zygote's copy of the course's probes/ folder
IMMUTABLETYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE (CPython 3.10+)


def _ours(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in (PREFIX, COURSE_PROBES))


class RefuseGrader(importlib.abc.MetaPathFinder):
    """First on `sys.meta_path` in a sealed worker: `import grader...` (or the course's
    `probes...`) raises ImportError."""

    def find_spec(self, name, path=None, target=None):
        if _ours(name):
            raise ModuleNotFoundError(f"No module named {name!r} (the grader's own code cannot "
                                      "be imported by a submission)", name=name)
        return None


# --------------------------------------------------------------------------- freezing classes


def _flags_offset() -> int | None:
    """Where `tp_flags` lies in a type object on this interpreter, checked on three types whose
    flags differ; None when it cannot be found (another implementation or layout)."""
    if sys.implementation.name != "cpython" or sys.version_info < (3, 10):
        return None

    class Probe:
        pass

    samples = (int, str, Probe, type)
    size = ctypes.sizeof(ctypes.c_ulong)
    for offset in range(3 * size, 64 * size, size):
        if all(ctypes.c_ulong.from_address(id(t) + offset).value == t.__flags__ for t in samples):
            return offset
    return None


def freeze_class(cls: type, offset: int) -> bool:
    """Mark `cls` immutable (as built-in types are); True when it now refuses `setattr`."""
    word = ctypes.c_ulong.from_address(id(cls) + offset)
    if word.value != cls.__flags__:
        return False
    word.value = cls.__flags__ | IMMUTABLETYPE
    return bool(cls.__flags__ & IMMUTABLETYPE)


def _classes(module: types.ModuleType) -> Iterator[type]:
    """Classes defined in `module`, nested ones included."""
    todo = [v for v in vars(module).values()
            if isinstance(v, type) and v.__module__ == module.__name__]
    seen: set[int] = set()
    while todo:
        cls = todo.pop()
        if id(cls) in seen:
            continue
        seen.add(id(cls))
        yield cls
        todo.extend(v for v in vars(cls).values()
                    if isinstance(v, type) and v.__module__ == module.__name__)


def _freezable(cls: type) -> bool:
    # pydantic models (WorkerLimits) finish building themselves lazily through setattr.
    # mypy takes `type(cls).__mro__` for the metaclass's mro() method (it is the attribute).
    return not any(c.__module__.startswith("pydantic")
                   for c in type(cls).__mro__)  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- fingerprints


def _functions(value) -> Iterator[types.FunctionType]:
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    if isinstance(value, property):
        yield from (f for f in (value.fget, value.fset, value.fdel)
                    if isinstance(f, types.FunctionType))
    elif isinstance(value, types.FunctionType):
        yield value


def _function_print(fn: types.FunctionType) -> tuple:
    """What student code could change in a function: its code, its defaults (replaced as a
    whole: the same tuple object until then), its keyword defaults and closure cells (their
    values, which can be changed in place)."""
    kwdefaults = fn.__kwdefaults__
    return (fn.__code__, fn.__defaults__,
            None if kwdefaults is None else tuple(kwdefaults.items()),
            None if fn.__closure__ is None else tuple(_cell(c) for c in fn.__closure__))


def _cell(cell) -> object:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


def _same_print(fn: types.FunctionType, then: tuple) -> bool:
    code, defaults, kwdefaults, cells = then
    if fn.__code__ is not code or fn.__defaults__ is not defaults:
        return False
    if kwdefaults is not None and not _same_pairs(fn.__kwdefaults__, kwdefaults):
        return False
    if cells is not None:
        closure = fn.__closure__ or ()
        if len(closure) != len(cells) or any(_cell(c) is not v for c, v in zip(closure, cells)):
            return False
    return kwdefaults is not None or fn.__kwdefaults__ is None


def _same_pairs(now: dict | None, then: tuple) -> bool:
    return now is not None and len(now) == len(then) and all(
        now.get(k, now) is v for k, v in then)


class Sealed:
    """What `seal()` made: the probe table, and the fingerprint of the worker's own code."""

    def __init__(self, modules: dict[str, types.ModuleType], probes: dict[str, Callable],
                 frozen: list[str], unfrozen: list[str]):
        self.probes = types.MappingProxyType(dict(probes))  # read-only
        self.frozen = frozen
        self.unfrozen = unfrozen  # classes left mutable (pydantic models)
        self._modules = modules
        self._names = {name: dict(vars(m)) for name, m in modules.items()}
        self._builtins = dict(vars(builtins))
        self._prints = {where: (fn, _function_print(fn)) for where, fn in self._all_functions()}

    def _all_functions(self) -> Iterator[tuple[str, types.FunctionType]]:
        for name, module in self._modules.items():
            for key, value in list(vars(module).items()):
                if isinstance(value, types.FunctionType) and value.__module__ == name:
                    yield f"{name}.{key}", value
            for cls in _classes(module):
                for key, value in list(vars(cls).items()):
                    for fn in _functions(value):
                        yield f"{name}.{cls.__qualname__}.{key}", fn

    def changed(self) -> str | None:
        """The first thing student code changed in the worker's own code, or None."""
        for name, then in self._names.items():
            what = _changed_names(vars(self._modules[name]), then, added=True)
            if what:
                return f"{name}.{what}"
        what = _changed_names(vars(builtins), self._builtins, added=False)
        if what:
            return f"builtins.{what}"
        for where, (fn, printed) in self._prints.items():
            if not _same_print(fn, printed):
                what = "code" if fn.__code__ is not printed[0] else "defaults or closure"
                return f"the {what} of {where} was changed"
        return None


# Names Python itself adds to a module's globals, and builtins a submission may replace without
# touching anything a probe measures with.
IGNORED_NAMES = {"__warningregistry__", "__builtins__", "_", "print", "input", "help", "exit",
                 "quit", "copyright", "credits", "license"}


def _changed_names(now: dict, then: dict, *, added: bool) -> str | None:
    """What differs between a namespace and its snapshot (identity of every value), or None."""
    for key, value in then.items():
        if key not in IGNORED_NAMES and now.get(key, now) is not value:
            return f"{key} was replaced" if key in now else f"{key} was deleted"
    if added:
        for key in now.keys() - then.keys() - IGNORED_NAMES:
            return f"{key} was added"
    return None


# --------------------------------------------------------------------------- the seal


def resolve_probes() -> dict[str, Callable]:
    """"module:function" -> function, for every public function defined in a module of
    `grader.probes` (the generic ones) or of the course's `probes` package (imported by
    `load_course_probes`; a course's module of the same name as a generic one wins), importing
    them all. A module that fails to import (a broken installation, a course's broken probe)
    maps each of its would-be names to nothing: `broken_probe` then says why.

    Resolved once per process and kept: the zygote resolves them before any fork (`zygote.warm`,
    then `load_course_probes`), and each worker gets the table with the fork, before any
    student code runs, instead of listing the package's folder again (~1.4 ms per worker).
    `seal()` copies it."""
    if _RESOLVED:
        return dict(_RESOLVED)
    import grader.probes as package

    table: dict[str, Callable] = {}
    packages = [package]
    course = sys.modules.get(COURSE_PROBES)
    if isinstance(course, types.ModuleType) and getattr(course, "__path__", None):
        packages.append(course)
    for each in packages:
        for info in pkgutil.iter_modules(each.__path__):
            if info.name.startswith("_"):
                continue
            try:
                module = importlib.import_module(f"{each.__name__}.{info.name}")
            except Exception as exc:  # noqa: BLE001 - reported on use, the worker still serves
                _BROKEN[info.name] = f"{type(exc).__name__}: {exc}"
                continue
            for name, value in vars(module).items():
                if (isinstance(value, types.FunctionType) and value.__module__ == module.__name__
                        and not name.startswith("_")):
                    table[f"{info.name}:{name}"] = value
    _RESOLVED.update(table)
    return table


def install_course_probes(folder: str | os.PathLike[str] | None) -> None:
    """Make `folder` (a course's `probes/`) the package `probes` of this process: its modules
    import as `probes.<module>`, and from each other so. Another course's `probes` imported
    before is forgotten first (two courses' probes of one name never mix); None: none at all."""
    where = [os.path.realpath(folder)] if folder is not None else None
    current = sys.modules.get(COURSE_PROBES)
    if where is not None and current is not None and \
            list(getattr(current, "__path__", None) or []) == where:
        return
    for name in [n for n in list(sys.modules)
                 if n == COURSE_PROBES or n.startswith(COURSE_PROBES + ".")]:
        del sys.modules[name]
    importlib.invalidate_caches()
    if where is None:
        return
    spec = importlib.machinery.ModuleSpec(COURSE_PROBES, None, is_package=True)
    module = importlib.util.module_from_spec(spec)
    module.__path__ = where
    sys.modules[COURSE_PROBES] = module


def load_course_probes(folder: str | None) -> None:
    """In the zygote, before `prepare()`: import the course's probes from `folder` (the grader's
    copy of its probes/ folder) and resolve them with the grader's, for every worker forked
    after. None: the course has none."""
    if folder is None:
        return
    install_course_probes(folder)
    sys.path_importer_cache[os.path.realpath(folder)] = importlib.machinery.FileFinder(
        os.path.realpath(folder), (CourseProbeLoader, [".py"]))
    _RESOLVED.clear()
    resolve_probes()


class CourseProbeLoader(importlib.machinery.SourceFileLoader):
    """A course's probe read from the zygote's copy but compiled under its name in the course,
    `probes/<module>.py`: what a warning or a traceback through it shows a student, the same in
    every run (the copy's folder is a new one each time) and naming no folder of the machine.
    Its lines are put in `linecache` under that name, where the warning's source line is read."""

    def source_to_code(self, data, path, *, _optimize=-1):  # type: ignore[override]
        shown = f"{COURSE_PROBES}/{os.path.basename(path)}"
        text = importlib.util.decode_source(data)
        linecache.cache[shown] = (len(text), None, text.splitlines(True), shown)
        return compile(text, shown, "exec", dont_inherit=True, optimize=_optimize)


_RESOLVED: dict[str, Callable] = {}
_BROKEN: dict[str, str] = {}


def broken_probe(name: str) -> str | None:
    """Why the probe module of `name` ("module:function") could not be imported, if it could
    not."""
    return _BROKEN.get(name.partition(":")[0])


def seal() -> Sealed:
    """Resolve, freeze, fingerprint and hide the grader's code in this process (see the module
    docstring). Call once, in the worker, before any student code runs."""
    probes = resolve_probes()
    modules = {name: m for name in _our_module_names()
               if isinstance(m := sys.modules.get(name), types.ModuleType)}
    offset = _flags_offset()
    frozen, unfrozen = [], []
    for name, module in modules.items():
        for cls in _classes(module):
            where = f"{name}.{cls.__qualname__}"
            if offset is not None and _freezable(cls) and freeze_class(cls, offset):
                frozen.append(where)
            else:
                unfrozen.append(where)
    sealed = Sealed(modules, probes, frozen, unfrozen)
    for name in modules:
        del sys.modules[name]
    # First on the meta path, it answers every import of ours before any finder or cache.
    sys.meta_path.insert(0, RefuseGrader())
    return sealed


def prepare() -> None:
    """In the zygote, after its last import: resolve the probes and list the grader's modules
    once, for every worker forked after (`seal()` then only checks that the worker imported no
    module since). Listing sys.modules again in each worker costs ~5 ms of copy-on-write page
    faults in a fresh fork (its ~2000 names and modules touched), a tenth of a worker's start."""
    resolve_probes()
    _LISTED[:] = [len(sys.modules), _our_module_names()]


_LISTED: list = []  # [how many modules sys.modules held, the names of ours among them]


def _our_module_names() -> list[str]:
    """The names of the grader's modules in sys.modules: the zygote's list when nothing was
    imported since (before any student code, only the worker's own start-up runs, and it only
    adds modules), else listed now."""
    if _LISTED and _LISTED[0] == len(sys.modules):
        return list(_LISTED[1])
    return [n for n in list(sys.modules) if _ours(n)]
