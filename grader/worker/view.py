"""The proof, run in a worker by the zygote's start-up self-test, that the worker's view holds
nothing but its allowlist (`sandbox.view_spec`): runs next to student code, imports nothing."""

from __future__ import annotations

import os
from collections.abc import Iterable

ENV = "TORCHGRADE_VIEW"  # the spec, from the grader to the zygote
WALK_LIMIT = 10_000  # folders listed at most; a view that big is no allowlist


def inside(path: str, folders: Iterable[str]) -> bool:
    """`path` is one of `folders` or lies in one (both normalised, absolute)."""
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def leaks(spec: dict) -> list[str]:
    """Paths this process can see but should not: a `hidden` path that exists (unless it is an
    empty mask, a private folder, or a folder made only to hold allowed paths), and anything in
    the view's folder skeleton, from "/", that leads to no allowed path."""
    allowed = {os.path.normpath(p) for p in spec["allowed"]}
    masks = {os.path.normpath(p) for p in spec["masks"]}
    private = {os.path.normpath(p) for p in spec["private"]}
    found: list[str] = []
    budget = [WALK_LIMIT]

    def ancestor(path: str) -> bool:
        prefix = path.rstrip("/") + "/"
        return any(p.startswith(prefix) for p in allowed | masks | private)

    def empty(path: str) -> bool:
        try:
            return not os.listdir(path) if os.path.isdir(path) else os.path.getsize(path) == 0
        except OSError:
            return True  # cannot be read: nothing to see

    def walk(folder: str) -> None:
        """Every entry of a skeleton folder leads to an allowed path, or is one."""
        budget[0] -= 1
        if budget[0] < 0:
            found.append(folder + " (too large to check)")
            return
        try:
            names = os.listdir(folder)
        except OSError:
            return
        for name in sorted(names):
            check(os.path.join(folder, name))

    def check(path: str) -> None:
        if path in allowed or path in private:
            return
        if path in masks:
            if not empty(path):
                found.append(path)
        elif ancestor(path) and os.path.isdir(path) and not os.path.islink(path):
            walk(path)
        else:
            found.append(path)

    walk("/")
    for raw in spec["hidden"]:
        path = os.path.normpath(raw)
        if not os.path.lexists(path) or path in private:
            continue
        if inside(path, allowed) and not inside(path, masks):
            found.append(path)  # inside the Python installation, say
        elif path not in found:
            # In /tmp too: a folder made to hold allowed paths, or a leak; or an installed
            # course, masked (`sandbox.view_binds`), which must then be empty.
            check(path)
    return sorted(set(found))
