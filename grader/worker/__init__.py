"""The trust boundary: student code runs only in processes forked by `zygote`.

`client` is the grader's side, `child` the worker's side, `wire` the format between them.
Nothing in this package may import checks, solutions or reference values: the worker side
runs inside the sandbox, next to student code.
"""
