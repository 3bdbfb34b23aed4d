"""What a sandboxed run may see and do: bubblewrap's command line and the seccomp filter.

The containment is bubblewrap's (Debian's `bubblewrap`, the tool Flatpak runs on), working as
an unprivileged user through user namespaces:

- fresh user, pid, network, IPC, UTS and cgroup namespaces (`--unshare-all`); no nested user
  namespaces (`--disable-userns`); a new session (no terminal injection); killed with its
  parent; an empty environment but PATH, HOME, TMPDIR and LANG;
- a root that holds, read-only, the system's shared libraries, the interpreter and its
  standard library, and nothing else: every `site-packages` or `dist-packages` folder under
  them, and the folder regress itself was imported from, are covered by empty tmpfs mounts,
  so neither regress, its task data (the hidden tests and reference solutions) nor any
  installed package is readable; no `/run`, `/var`, `/home`, `/etc` but the loader's cache;
- a private tmpfs of `disk_bytes` as the working folder, the only writable place;
- a seccomp filter built by libseccomp: `socket(2)` only for AF_INET and AF_INET6 (the network
  namespace has only a loopback that is down), `socketpair(2)` only for AF_UNIX, and io_uring
  (which can open and connect sockets without `socket(2)`), kernel keyrings, `bpf`,
  `userfaultfd`, `perf_event_open` and ptrace-style access to other processes' memory
  refused outright.
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
import site
import socket
import sys
import sysconfig
import tempfile
from collections.abc import Iterable
from pathlib import Path

import regress

SANDBOX_DIR = "/sandbox"
CHILD_PATH = "/regress/sandbox_child.py"
ALLOWED_FAMILIES = (socket.AF_INET, socket.AF_INET6)
DENIED_SYSCALLS = (
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "add_key", "request_key", "keyctl", "bpf", "userfaultfd", "perf_event_open",
    "process_vm_readv", "process_vm_writev", "ptrace", "kcmp",
)  # fmt: skip
"""Refused with ENOSYS, so programs that probe for them fall back as on an older kernel."""
_LIB_DIRS = ("/usr/lib", "/usr/lib64", "/usr/lib32", "/lib", "/lib64", "/lib32")


class Unavailable(Exception):
    """bubblewrap or libseccomp is missing here: no run can be contained."""


def bwrap_path() -> str:
    """The bwrap executable; Unavailable with the install line when there is none."""
    found = shutil.which("bwrap")
    if found is None:
        raise Unavailable(
            "bubblewrap is not installed (`apt-get install bubblewrap`; docs/guarantees.md)"
        )
    return found


@functools.cache
def seccomp_program() -> bytes:
    """The filter as BPF bytes for `bwrap --seccomp`, compiled by libseccomp (which handles
    each architecture's quirks, such as x86's multiplexed `socketcall` and the x32 ABI)."""
    try:
        import pyseccomp as sc
    except (ImportError, OSError) as exc:  # pyseccomp loads libseccomp.so.2 on import
        raise Unavailable(f"libseccomp is not available: {exc}") from None
    rules = sc.SyscallFilter(sc.ALLOW)
    deny = sc.ERRNO(errno.EACCES)
    for call in DENIED_SYSCALLS:
        rules.add_rule(sc.ERRNO(errno.ENOSYS), call)
    # An allowlist of families, as comparisons on the first argument: below, between and
    # above the allowed values (libseccomp takes one comparison per argument and rule).
    allowed = sorted(int(f) for f in ALLOWED_FAMILIES)
    rules.add_rule(deny, "socket", sc.Arg(0, sc.LT, allowed[0]))
    rules.add_rule(deny, "socket", sc.Arg(0, sc.GT, allowed[-1]))
    for family in range(allowed[0] + 1, allowed[-1]):
        if family not in allowed:
            rules.add_rule(deny, "socket", sc.Arg(0, sc.EQ, family))
    rules.add_rule(deny, "socketpair", sc.Arg(0, sc.NE, int(socket.AF_UNIX)))
    with tempfile.TemporaryFile() as out:
        rules.export_bpf(out)
        out.seek(0)
        return out.read()


def _libpython() -> str | None:
    """The libpython this process runs on, for a shared build: read from its memory map, as
    the build-time LIBDIR is wrong for an interpreter moved since (a cached toolcache)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split(maxsplit=5)[-1].strip()
            if "/libpython3" in path and os.path.exists(path):
                return os.path.realpath(path)
    return None


def _stdlib_dirs() -> list[str]:
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}
    names = ("stdlib", "platstdlib")
    return sorted({os.path.realpath(sysconfig.get_path(n, vars=base)) for n in names})


def _package_dirs() -> set[str]:
    """Every folder installed packages (regress among them) may be imported from."""
    found = set(site.getsitepackages())
    found.add(site.getusersitepackages())
    for base in ({}, {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}):
        found.update(sysconfig.get_path(n, vars=base) for n in ("purelib", "platlib"))
    found.add(str(Path(regress.__file__).resolve().parents[1]))
    return {os.path.realpath(p) for p in found if p}


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def bwrap_argv(disk_bytes: int, child: str, seccomp_fd: int | None) -> list[str]:
    """bubblewrap's arguments up to the command: the namespaces, the read-only root, the
    masks over installed packages, the private working folder and the seccomp filter."""
    argv = [bwrap_path(), "--unshare-all", "--unshare-user", "--disable-userns",
            "--die-with-parent", "--new-session", "--clearenv", "--hostname", "sandbox",
            "--proc", "/proc", "--dev", "/dev"]  # fmt: skip
    bound: list[str] = []
    for path in _LIB_DIRS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
            bound.append(path)
    if os.path.exists("/etc/ld.so.cache"):
        argv += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    libpython = _libpython()
    python = [
        *_stdlib_dirs(),
        os.path.realpath(sys.executable),
        *([libpython] if libpython else []),
    ]
    for file in python:
        if not _under(file, bound):
            argv += ["--ro-bind", file, file]
            bound.append(file)
    masks = {p for p in _package_dirs() if _under(p, bound) and os.path.isdir(p)}
    for root in bound:
        masks.update(str(p) for p in Path(root).glob("python3*/*-packages") if p.is_dir())
    for mask in sorted(masks):
        argv += ["--tmpfs", mask, "--remount-ro", mask]
    argv += ["--ro-bind", child, CHILD_PATH]
    argv += ["--size", str(disk_bytes), "--perms", "0700", "--tmpfs", SANDBOX_DIR]
    # The root's own tmpfs and /dev's have no size: the working folder is the one place
    # to write, and its size is the disk cap. Device nodes stay writable on a read-only mount.
    argv += ["--remount-ro", "/dev", "--remount-ro", "/"]
    argv += ["--chdir", SANDBOX_DIR]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    for name, value in (("PATH", "/usr/bin:/bin"), ("HOME", SANDBOX_DIR),
                        ("TMPDIR", SANDBOX_DIR), ("LANG", "C.UTF-8"),
                        ("PYTHONDONTWRITEBYTECODE", "1")):  # fmt: skip
        argv += ["--setenv", name, value]
    if libpython and not _under(libpython, _LIB_DIRS):
        # Its binary's RUNPATH names where it was built, which may not be where it is now.
        argv += ["--setenv", "LD_LIBRARY_PATH", os.path.dirname(libpython)]
    return argv
