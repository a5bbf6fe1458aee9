"""The curriculum contract: the exercise stubs students fill in.

A stub is the file a student edits. Its docstrings state the name, signature and meaning of
every function or class in it; reference code in `solutions/` and the hidden checks follow
them exactly, so that a submission written against them is graded the same way on every
machine and in every release. `CURRICULUM.md` at the repository root gathers them in
curriculum order, generated from the stubs (`python -m grader.release.curriculum > CURRICULUM.md`; a
test keeps it current). Add exercises freely; rename or change nothing a stub states without a
note on the issue that asked for it.

General rules for every exercise:

- A student file is a plain Python module (or a notebook with the same stem, e.g.
  `strides_broadcasting.ipynb`). Stubs raise `NotImplementedError("...")` and carry a
  docstring that states the contract, a worked example, and a `# TODO` where the work goes.
- numpy functions take and return `np.ndarray` (or the Python types named). torch functions
  take and return `torch.Tensor`. Floats come back as Python `float` where the contract says
  `float`.
- Invalid arguments named in a contract raise `ValueError`. A check never needs a particular
  error message from the student.
- A correct solution must pass every check on every seed, every time: a check that can fail a
  correct solution (flaky tolerance, timing on a slow machine, unseeded randomness) is a bug.
"""
