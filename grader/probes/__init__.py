"""Instrumentation that runs *inside the worker*, next to student code.

A probe is `function(student_module, *args, **kwargs)` returning plain data (records, counts,
tensors). Probes observe; they hold no expected values and decide no verdict: the check that
called them compares their records with references computed in the grader.
"""
