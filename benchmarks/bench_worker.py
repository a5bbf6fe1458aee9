#!/usr/bin/env python3
"""Benchmark one sandboxed worker's life against a bare fork of a process that imported torch.

    python benchmarks/bench_worker.py [--runs 40]

Every check of an exercise starts in a fresh worker, forked by the zygote under the sandbox
(a keeper joining the worker's cgroups, an init in new namespaces, the worker confining and
sealing itself), so a bulk run of ten exercises starts ten workers per submission, and a
student's check one per exercise. In one run, side by side, each `--runs` times:

1. the baseline: `os.fork()` of this process (which imported torch and torch._dynamo, as a
   zygote for exercises that train has), the child exiting at once, `waitpid`: what no worker
   start can be cheaper than;
2. a worker from a running `Zygote`: spawned, answering its first request (`ping`: it is then
   confined, limited and sealed, ready for student code), then closed.

Then, in one worker, the private memory (USS) after a full `gc.collect()`: the pages a worker
copies when the collector walks what it shares with its zygote.

Prints medians and the ratios worker / bare fork. No assertions: the machine may be shared,
so run it more than once and report the spread.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
import torch._dynamo  # noqa: F401 - the baseline forks what a zygote for training holds

from grader.models import ModuleSource, SourceChunk
from grader.checking.student import StudentModule
from grader.worker import wire
from grader.worker.client import Zygote
from grader.worker.limits import WorkerLimits

PRIVATE_AFTER_COLLECT = """
import gc
def private_mb():
    gc.collect()
    total = 0
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith(("Private_Clean", "Private_Dirty")):
                total += int(line.split()[1])
    return total / 1024
"""


def bare_fork() -> float:
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return time.perf_counter() - started


def worker_life(zygote: Zygote, limits: WorkerLimits) -> tuple[float, float]:
    started = time.perf_counter()
    worker = zygote.spawn(limits)
    worker.request({"op": "ping"}, 10.0, wire.SegmentTable())
    ready = time.perf_counter() - started
    worker.close()
    return ready, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    torch.set_num_threads(1)
    limits = WorkerLimits()
    forks, ready, life = [], [], []
    with Zygote() as zygote:
        worker_life(zygote, limits)  # the first pays for the zygote's own first fork
        for _ in range(args.runs):  # alternating, so that a change of load moves both
            forks.append(bare_fork())
            r, whole = worker_life(zygote, limits)
            ready.append(r)
            life.append(whole)
        chunks = [SourceChunk(code=PRIVATE_AFTER_COLLECT, filename="m.py", label="m.py")]
        module = StudentModule("m", ModuleSource(exercise="m", path="m.py", kind="py",
                                                 chunks=chunks),
                               spawn=zygote.spawn, limits=limits)
        try:
            private = module.call("private_mb")
        finally:
            module.close()
    fork_ms = 1000 * statistics.median(forks)
    ready_ms, life_ms = 1000 * statistics.median(ready), 1000 * statistics.median(life)
    print(f"{args.runs} runs each, medians; isolation: "
          f"{'namespaces' if zygote.contained else 'no namespaces'}")
    print(f"bare fork + exit + wait of a process with torch imported: {fork_ms:.1f} ms")
    print(f"worker spawned until its first reply: {ready_ms:.1f} ms = {ready_ms / fork_ms:.1f} x "
          f"the bare fork")
    print(f"worker spawned, answering, closed:   {life_ms:.1f} ms = {life_ms / fork_ms:.1f} x "
          f"the bare fork")
    print(f"a worker's private memory after a full gc.collect(): {private:.1f} MB")


if __name__ == "__main__":
    main()
