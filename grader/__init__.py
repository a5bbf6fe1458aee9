"""torchgrade: exercises and a sandboxed grader for deep-learning fundamentals with PyTorch.

This package must stay cheap to import and free of answers: the warm worker parent
(`grader.worker.zygote`) imports it before it forks the processes that run student code. So it
imports nothing at its top level: the check authors' API (`from grader import check, fail, ...`,
docs/AUTHORING.md) lives in `grader.api` and is loaded on first use of one of its names
(PEP 562 `__getattr__`), never by `import grader` itself.
"""

__version__ = "0.1.0"

# The names of `grader.api` (kept equal to its `__all__` by tests/test_fast_api.py: this list
# must not import the module to know them).
__all__ = [
    "check",
    "fail", "CheckFailure",
    "expect_equal", "expect_array", "expect_type", "expect_view", "expect_no_view",
    "expect_unchanged", "as_int_tuple", "as_bool",
    "format_call", "short",
    "StudentError", "StudentModule",
    "solution_module",
]

# Type checkers read the API's own signatures (`fail` never returns, say); at run time this
# constant is False and nothing is imported.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from grader.api import *  # noqa: F403, F401


def __getattr__(name: str):
    """`grader.<name>` for a name of the authors' API: imported from `grader.api` on first use
    (then cached in this module's namespace, so the next lookup does not come here)."""
    if name in __all__:
        # The one import up the floor plan (tests/test_layout.py allows exactly this one):
        # lazy, so that `import grader` loads no later stage.
        from grader import api

        value = getattr(api, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'grader' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
