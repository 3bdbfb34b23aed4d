"""The sandboxed side of `regress.tasks.scoring.sandbox`: contain this process, then compute
the values the hidden tests ask for.

Run as `python -I -S sandbox_child.py CONFIG_JSON` with the sandbox folder as working
directory, a scrubbed environment and the run's nonce on stdin. Standard library only: `-S`
keeps site-packages (and regress itself) out, and nothing outside the read roots is readable
once Landlock is on.

Order matters. Joining the pids cgroup and the namespaces needs the privileges the later
steps drop; rlimits and Landlock survive fork; `no_new_privs` must precede Landlock. Each
layer that cannot be applied is an error (exit 125, one `sandbox:` line on stderr) unless the
parent listed it as optional. The applied layers are written as JSON to the report pipe,
closed before the tested code runs. Then the process forks: the child is pid 1 of the new
pid namespace (an init that only reaps) and forks the worker that runs the tests. When init
exits, the kernel kills everything left in the namespace, so a fork bomb cannot outlive the
run.

The worker only computes: it runs the solution, evaluates each expression the parent sent
(the left side of a hidden `assert`, never the expected value), and prints the values in a
tagged JSON form of plain built-in types. The parent decodes them by its own rules and judges;
nothing printed here can claim a pass, and an object with a rigged `__eq__` is not a value.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys
import traceback

SETUP_FAILED = 125
RESULT_PREFIX = "REGRESS-SANDBOX-RESULT"
MAX_NODES = 10_000
"""Values, elements and keys one result may hold; a larger value is not reported."""

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 2, 4, 1 << 14, 1 << 18
SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
# Filesystem rights by the Landlock ABI that introduced them (linux/landlock.h).
FS_READ = (1 << 0) | (1 << 2) | (1 << 3)  # execute, read_file, read_dir
FS_ALL_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
FS_FILE_ONLY = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 14) | (1 << 15)
NET_BIND_CONNECT_TCP = (1 << 0) | (1 << 1)
SCOPE_ABSTRACT_UNIX_AND_SIGNAL = (1 << 0) | (1 << 1)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class SetupError(Exception):
    """A containment layer could not be applied."""


class SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(SockFilter))]


class RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _check(result: int, what: str) -> int:
    if result < 0:
        raise SetupError(f"{what}: {os.strerror(ctypes.get_errno())}")
    return result


def join_cgroup(path: str) -> None:
    """Move this process into a cgroup the parent made (its pids.max or memory cap holds)."""
    with open(os.path.join(path, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))


def enter_namespaces(uid: int, gid: int) -> None:
    """New user, mount, network and pid namespaces; this uid and gid map to themselves."""
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID), "unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                       ("gid_map", f"{gid} {gid} 1")):  # fmt: skip
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def private_disk(path: str, size: int, inodes: int) -> None:
    """A tmpfs of `size` bytes and `inodes` files over the sandbox folder, in this mount
    namespace only: RLIMIT_FSIZE caps one file, this caps them all (and /tmp is not writable
    under Landlock). The folder's files were read before."""
    _check(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "private mounts")
    options = f"size={size},nr_inodes={inodes},mode=0700".encode()
    _check(_libc.mount(b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options), "tmpfs")
    os.chdir(path)  # the tmpfs, not the folder beneath it


# What the socket filter refuses: unix sockets reach daemons outside the sandbox by path
# (docker.sock), which neither the network namespace nor Landlock covers; netlink and packet
# sockets talk to the kernel's network stack.
AF_DENIED = (1, 16, 17)  # AF_UNIX, AF_NETLINK, AF_PACKET
_SYS_SOCKET = 41  # x86-64
_AUDIT_ARCH_X86_64 = 0xC000003E
_EACCES = 13


def deny_sockets() -> None:
    """A seccomp filter: socket(2) of the AF_DENIED families fails with EACCES; other system
    calls and ABIs than x86-64's kill the process (an i386 `socketcall` would slip past)."""
    if os.uname().machine != "x86_64":
        raise SetupError(f"the socket filter is written for x86_64, not {os.uname().machine}")
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    allow, deny, kill = 0x7FFF0000, 0x00050000 | _EACCES, 0x80000000
    program = [
        (ld, 0, 0, 4),  # arch
        (jeq, 0, 9, _AUDIT_ARCH_X86_64),
        (ld, 0, 0, 0),  # system call number
        (jge, 7, 0, 0x40000000),  # the x32 ABI
        (jeq, 0, 4, _SYS_SOCKET),
        (ld, 0, 0, 16),  # args[0]: the address family
        (jeq, 3, 0, AF_DENIED[0]),
        (jeq, 2, 0, AF_DENIED[1]),
        (jeq, 1, 0, AF_DENIED[2]),
        (ret, 0, 0, allow),
        (ret, 0, 0, deny),
        (ret, 0, 0, kill),
    ]
    filters = (SockFilter * len(program))(*(SockFilter(*i) for i in program))
    fprog = SockFprog(len(program), filters)
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")


def set_limits(limits: dict[str, int]) -> None:
    """Hard and soft rlimits alike, so the tested code cannot raise them back."""
    for name, value in limits.items():
        resource.setrlimit(getattr(resource, name), (value, value))


def landlock(abi: int, sandbox_dir: str, read_roots: list[str]) -> None:
    """Writes only beneath the sandbox folder, reads only beneath the read roots, no TCP,
    no signals or abstract unix sockets outside the sandbox (what this ABI can express)."""
    fs_all = FS_ALL_BY_ABI[max(v for v in FS_ALL_BY_ABI if v <= abi)]
    attr = RulesetAttr(
        handled_access_fs=fs_all,
        handled_access_net=NET_BIND_CONNECT_TCP if abi >= 4 else 0,
        scoped=SCOPE_ABSTRACT_UNIX_AND_SIGNAL if abi >= 6 else 0,
    )
    size = ctypes.sizeof(RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = _check(
        _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), size, 0), "landlock"
    )
    rules = [(root, FS_READ) for root in read_roots] + [(sandbox_dir, fs_all)]
    for path, access in rules:
        if not os.path.exists(path):
            continue
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        try:
            allowed = access & fs_all
            if not os.path.isdir(path):
                allowed &= FS_FILE_ONLY
            rule = PathBeneathAttr(allowed_access=allowed, parent_fd=fd)
            _check(
                _libc.syscall(SYS_LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH,
                              ctypes.byref(rule), 0),
                f"landlock rule for {path}",
            )  # fmt: skip
        finally:
            os.close(fd)
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _check(_libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0), "landlock restrict_self")
    os.close(ruleset)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, or 0 when Landlock is off."""
    return max(
        0, _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, 0, LANDLOCK_CREATE_RULESET_VERSION)
    )


def kernel_root(uid: int) -> bool:
    """Whether `uid` is root to the kernel, which never holds root to RLIMIT_NPROC: uid 0, or
    a uid this user namespace maps to its parent's 0 (regress run as a mapped user inside a
    rootless container's namespace). One level is read; deeper parents are not visible."""
    if uid == 0:
        return True
    with open("/proc/self/uid_map") as lines:
        for line in lines:
            inner, outer, count = (int(field) for field in line.split())
            if inner <= uid < inner + count:
                return outer + uid - inner == 0
    return False


def contain(config: dict) -> list[str]:
    """Apply every layer; return the names of those applied."""
    optional = set(config["optional"])
    applied: list[str] = []
    # Read before entering namespaces: inside the fresh one every map is this process's own.
    root = kernel_root(os.getuid())

    def layer(name: str, apply) -> None:
        try:
            apply()
        except (OSError, SetupError, ValueError) as e:
            if name not in optional:
                raise SetupError(f"{name}: {e}") from e
        else:
            applied.append(name)

    def process_limit() -> None:
        if config["cgroup"]:
            join_cgroup(config["cgroup"])
        elif root:
            raise SetupError("RLIMIT_NPROC does not bind root and no pids cgroup is writable")
        elif "namespaces" not in applied:
            # RLIMIT_NPROC counts per user namespace: outside a fresh one it would count
            # (and collide with) every process of this user on the machine.
            raise SetupError("RLIMIT_NPROC needs the user namespace")

    def memory_limit() -> None:
        group = config["memory_cgroup"]
        if group and group != config["cgroup"]:
            join_cgroup(group)
        elif not group:
            if root:
                raise SetupError(
                    "no memory cgroup is writable, and RLIMIT_NPROC does not bind root"
                )
            if "namespaces" not in applied:
                raise SetupError("RLIMIT_NPROC needs the user namespace")
            # Without a cgroup, few processes of RLIMIT_AS each add up to the total.
            nproc = min(config["rlimits"]["RLIMIT_NPROC"], config["memory_nproc"])
            config["rlimits"]["RLIMIT_NPROC"] = nproc

    if config["cgroup"]:
        layer("process_limit", process_limit)
        if config["memory_cgroup"]:
            layer("memory_limit", memory_limit)
    layer("namespaces", lambda: enter_namespaces(os.getuid(), os.getgid()))
    if not config["cgroup"]:
        layer("process_limit", process_limit)
    if not (config["cgroup"] and config["memory_cgroup"]):
        layer("memory_limit", memory_limit)

    def disk() -> None:
        if "namespaces" not in applied:
            raise SetupError("a private tmpfs needs the mount namespace")
        private_disk(os.getcwd(), config["disk_bytes"], config["disk_files"])

    layer("disk", disk)
    set_limits(config["rlimits"])
    applied.append("rlimits")

    def apply_landlock() -> None:
        abi = landlock_abi()
        if abi < config["min_landlock_abi"]:
            raise SetupError(f"kernel Landlock ABI {abi} < {config['min_landlock_abi']}")
        landlock(abi, os.getcwd(), config["read_roots"])

    layer("landlock", apply_landlock)
    layer("sockets", deny_sockets)
    return applied


class _Unreportable(Exception):
    """A value that is not plain built-in data, or too large."""


_CONTAINERS = {list: "list", tuple: "tuple", set: "set", frozenset: "frozenset"}


def encode(value: object, budget: list[int]) -> dict:
    """`value` as tagged JSON of exact built-in types (a subclass is not one); `budget` counts
    down the nodes left."""
    budget[0] -= 1
    if budget[0] < 0:
        raise _Unreportable(f"more than {MAX_NODES} elements")
    kind = type(value)
    if value is None:
        return {"t": "none"}
    if kind is bool:
        return {"t": "bool", "v": value}
    if kind is int:
        return {"t": "int", "v": str(value)}
    if kind is float:
        return {"t": "float", "v": repr(value)}
    if kind is str:
        return {"t": "str", "v": value}
    if kind in _CONTAINERS:
        return {"t": _CONTAINERS[kind], "v": [encode(x, budget) for x in value]}
    if kind is dict:
        return {
            "t": "dict",
            "v": [[encode(k, budget), encode(v, budget)] for k, v in value.items()],
        }
    raise _Unreportable(f"a {kind.__name__} is not plain data")


def run_tests(source: str, expressions: list[str], nonce: str) -> None:
    """Run the solution, then evaluate each expression; print one result line with the nonce:
    per expression its value (tagged), or what it raised."""
    main_pid = os.getpid()
    outcome: dict = {"status": "ran", "results": [], "errors": [], "memory": False}
    try:
        code = compile(source, "solution.py", "exec")
    except (SyntaxError, ValueError) as e:
        outcome.update(status="syntax_error", errors=[f"{type(e).__name__}: {e}"])
        print(f"{RESULT_PREFIX} {nonce} {json.dumps(outcome)}", flush=True)
        return
    namespace: dict = {"__name__": "solution"}
    steps = [None, *expressions]  # None: the solution itself
    for expression in steps:
        try:
            if expression is None:
                exec(code, namespace)
            else:
                value = eval(expression, namespace)
                outcome["results"].append({"value": encode(value, [MAX_NODES])})
        except BaseException as e:  # the tested code may raise anything, SystemExit too
            outcome["errors"].append(f"{type(e).__name__}: {str(e)[:200]}")
            outcome["memory"] = outcome["memory"] or isinstance(e, MemoryError)
            if expression is None:
                outcome["status"] = "raised"
                break
            outcome["results"].append({"raised": f"{type(e).__name__}"})
        if os.getpid() != main_pid:
            os._exit(1)  # a forked copy of the tested code reports nothing
    print(f"{RESULT_PREFIX} {nonce} {json.dumps(outcome)}", flush=True)


def _exit_status(status: int) -> int:
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def main() -> None:
    """Contain, report the layers, then init (pid 1) -> worker."""
    config = json.loads(sys.argv[1])
    nonce = sys.stdin.readline().strip()
    with open("solution.py", encoding="utf-8") as f:
        source = f.read()
    with open("expressions.json", encoding="utf-8") as f:
        expressions = json.load(f)
    try:
        applied = contain(config)
    except SetupError as e:
        print(f"sandbox: {e}", file=sys.stderr, flush=True)
        os._exit(SETUP_FAILED)
    with os.fdopen(config["report_fd"], "w") as report:
        report.write(json.dumps(applied))
    init = os.fork()
    if init:
        os._exit(_exit_status(os.waitpid(init, 0)[1]))
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    worker = os.fork()
    if worker:
        # Init: reap orphans until the worker ends; returning kills the namespace.
        while True:
            pid, status = os.wait()
            if pid == worker:
                os._exit(_exit_status(status))
    try:
        run_tests(source, expressions, nonce)
    except BaseException:
        traceback.print_exc()
        os._exit(1)
    os._exit(0)


if __name__ == "__main__":
    main()
