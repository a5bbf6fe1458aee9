"""The system calls a worker is denied, by a seccomp filter that libseccomp builds.

Two parts of the kernel are not contained by a worker's namespaces and uid, so student code
could use them to reach another submission:

- the kernel keyrings (add_key, request_key, keyctl): a uid's keyring is not namespaced, and
  workers' uids repeat within and across runs, so a key one submission leaves is read by a later
  one (Docker's default seccomp profile denies them for the same reason);
- new user namespaces (unshare or clone with CLONE_NEWUSER): a worker has no use for them, and
  inside one the rest of the kernel's namespaced interfaces open up to student code again.

They fail with EPERM. clone3 fails with ENOSYS, since a filter cannot read its flags: the C
library then falls back to clone, whose flags it can. The filter is built once, when the zygote
imports this module (libseccomp resolves each name for the machine's architecture), and each
worker loads it as its last step before student code runs (`load`). Where libseccomp is not
installed (Debian: libseccomp2, which nearly every system has), or the kernel refuses the filter
(one built without seccomp filters), workers run without it, as before: a layer on top of the
isolation level's, never a reason for a worker not to start (`available` says whether it is
built here).
"""

from __future__ import annotations

import ctypes
import errno

SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_MASKED_EQ = 7
CLONE_NEWUSER = 0x10000000
DENIED = ("add_key", "request_key", "keyctl")
NO_NEW_USER_NAMESPACE = ("unshare", "clone")  # their flags are their first argument


def _errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)  # SCMP_ACT_ERRNO


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int),
                ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


def _build() -> tuple[ctypes.CDLL, int] | None:
    """libseccomp and the filter (its context), or None where it cannot be built."""
    try:
        lib = ctypes.CDLL("libseccomp.so.2")  # by soname: find_library would run ldconfig
    except OSError:
        return None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                           ctypes.c_uint, ctypes.POINTER(_ArgCmp)]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        return None
    rules: list[tuple[str, int, list[_ArgCmp]]] = [(name, errno.EPERM, []) for name in DENIED]
    rules += [(name, errno.EPERM, [_ArgCmp(0, SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER)])
              for name in NO_NEW_USER_NAMESPACE]
    rules.append(("clone3", errno.ENOSYS, []))
    for name, code, args in rules:
        number = lib.seccomp_syscall_resolve_name(name.encode())
        if number < 0:  # not a system call on this architecture
            continue
        array = (_ArgCmp * len(args))(*args) if args else None
        if lib.seccomp_rule_add_array(ctx, _errno(code), number, len(args), array) != 0:
            return None
    return lib, ctx


_FILTER = _build()


def available() -> bool:
    """Whether workers are filtered here (libseccomp is installed and built the filter)."""
    return _FILTER is not None


def load() -> bool:
    """Deny this process and every process it starts the calls above. False, and nothing done,
    where libseccomp is missing or the kernel refuses the filter."""
    if _FILTER is None:
        return False
    lib, ctx = _FILTER
    return lib.seccomp_load(ctx) == 0
