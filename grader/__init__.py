"""torchgrade: exercises and a sandboxed grader for deep-learning fundamentals with PyTorch.

This package must stay cheap to import and free of answers: the warm worker parent
(`grader.worker.zygote`) imports it before it forks the processes that run student code.
"""

__version__ = "0.1.0"
