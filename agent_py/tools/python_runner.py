"""A :class:`~agent_py.tools.python.PyRunner` for CPython: one limited Python process per call.

Each call starts ``python -I -S -B -X utf8`` (standard library only: no site-packages, no
environment variables, no user site, nothing of agent_py, no .pyc writes) in a fresh temporary
folder that is removed afterwards. The child runs :data:`_SANDBOX` first: it lowers its own
resource limits (CPU time, address space, file size, open files, no core dumps), installs an
audit hook (PEP 578) that refuses network access, new processes, and files outside its folder
(reading the standard library and the time zone data stays allowed, since imports need it),
then runs the program from stdin and writes the driver's JSON as one marked line on a
descriptor of its own. A hard timeout kills the child's process group.

What this does NOT isolate. It is for the user's own machine, like NodeRunner; the page's
Pyodide worker (``web/python-sandbox.html``) is the stronger sandbox.

- The hook is a policy inside the interpreter, not an operating-system boundary. It sees only
  operations that raise an audit event. The unaudited ways out that are known are shut by hand:
  ``_posixsubprocess.fork_exec``, ``os.mknod``, ``os.mkfifo``, ``os.chroot`` and
  ``os.pidfd_open`` are replaced (a program that rebuilds the built-in ``posix`` module through
  ``_imp`` gets the last four back; device nodes still cannot be opened), and ctypes, sqlite3
  (SQL ATTACH writes files), dbm's C back ends, readline (history files), tkinter (Tcl) and
  subinterpreters (no hooks) cannot be imported. Others may exist. Code that corrupts the
  interpreter (hand-built bytecode, a crash in a native module) is not contained.
- The hook checks a path before the call uses it: a program that swaps symbolic links from a
  second thread can race it. Metadata calls raise no event: ``os.stat`` of any path works.
- The child runs as the agent's user (root in our containers, where ``RLIMIT_NPROC`` does not
  bind: that is why processes are refused by the hook instead).
- CPU, memory and file sizes are bounded by rlimits per process; the timeout bounds wall time.
  The number of files written in the folder is not bounded.
- There is no network namespace: sockets are refused by the hook, except a local socket pair
  (family AF_UNIX, never connected or bound), which ``asyncio`` needs for its event loop.

CPython on POSIX only: the page has its own runner.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import shutil
import signal
import sys
import tempfile

from agent_py.tools.python import PyRunResult

_MARKER = "\x1eagent_py_result:"  # str.splitlines() would split at \x1e: split on "\n"

DEFAULT_MAX_MEMORY_MB = 1024
MAX_FILE_BYTES = 1024 * 1024
MAX_OPEN_FILES = 64

# Runs in the child under its own file name (see _BOOT): argv is [the sandbox, marker, cpu
# seconds, address space bytes, file bytes, open files]. Every function the audit hook calls
# takes what it uses as a positional default (an immutable tuple, set once): the program can
# reach these functions (through frames) but can neither rebind their defaults (the hook
# refuses that event) nor patch a module they use.
_SANDBOX = r'''
import ast, os, posix, resource, sys, types, zoneinfo
import _posixsubprocess

marker = sys.argv[2]
cpu_s, memory, file_bytes, open_files = (int(arg) for arg in sys.argv[3:7])
# Set here rather than in a preexec_fn, which is unsafe in a parent with threads (asyncio's
# child watcher is one) and rules out vfork. From the hook on, setrlimit is refused.
for which, soft, hard in (
    (resource.RLIMIT_CPU, cpu_s, cpu_s + 1),
    (resource.RLIMIT_AS, memory, memory),
    (resource.RLIMIT_FSIZE, file_bytes, file_bytes),
    (resource.RLIMIT_NOFILE, open_files, open_files),
    (resource.RLIMIT_CORE, 0, 0),
):
    resource.setrlimit(which, (soft, hard))

program = sys.stdin.buffer.read().decode("utf-8")
# The result goes out on a descriptor of its own; raw writes to fd 1 land on stderr.
result_fd = posix.dup(1)
posix.dup2(2, 1)
write, exit_now = posix.write, posix._exit


def real_path(path, dir_fd=None, _lstat=posix.lstat, _readlink=posix.readlink,
              _getcwd=posix.getcwd, _fspath=posix.fspath, _join=str.join,
              _decode=bytes.decode, _bytes=bytes, _int=int, _type=type, _OSError=OSError):
    """The absolute path that ``path`` (str, bytes, path-like, descriptor or None for the
    current folder) names, every symbolic link resolved, as os.path.realpath would give it
    (which the program could patch)."""
    if path is None:
        path = "."
    elif _type(path) is _int:
        path = _readlink("/proc/self/fd/%d" % path)
    else:
        path = _fspath(path)
        # An exact str whatever came in: a str subclass could override its methods.
        if _type(path) is _bytes:
            path = _decode(path, "utf-8", "surrogateescape")
        else:
            path = _join("", (path,))
    if not path.startswith("/"):
        relative_to_fd = _type(dir_fd) is _int and dir_fd >= 0
        base = _readlink("/proc/self/fd/%d" % dir_fd) if relative_to_fd else _getcwd()
        path = base + "/" + path
    todo = path.split("/")
    todo.reverse()
    done, hops = "", 0
    while todo:
        name = todo.pop()
        if name == "" or name == ".":
            continue
        if name == "..":
            done = done[: done.rfind("/")]
            continue
        here = done + "/" + name
        try:
            mode = _lstat(here).st_mode
        except _OSError:  # not there (yet): what a create would make
            done = here
            continue
        if mode & 0o170000 != 0o120000:
            done = here
            continue
        hops += 1
        if hops > 40:
            raise _OSError("too many levels of symbolic links")
        link = _readlink(here)
        if link.startswith("/"):
            done = ""
        more = link.split("/")
        more.reverse()
        todo.extend(more)
    return done or "/"


def file_type(path, _stat=posix.stat, _OSError=OSError):
    """The S_IFMT bits of what ``path`` is (0o040000 a folder), 0 when it is not there."""
    try:
        return _stat(path).st_mode & 0o170000
    except _OSError:
        return 0


WORK = (real_path(".") + "/",)
# With -I -S the import path is the standard library and lib-dynload, nothing else. (In a
# virtual environment, sysconfig's platstdlib is the environment's lib/pythonX.Y, which holds
# site-packages and agent_py.)
READ = tuple(real_path(root) + "/" for root in (*sys.path, *zoneinfo.TZPATH))
WRITE_FLAGS = posix.O_WRONLY | posix.O_RDWR | posix.O_CREAT | posix.O_TRUNC | posix.O_APPEND
# (event, ((path argument, dir_fd argument or -1), ...), may it touch the read-only folders)
PATH_EVENTS = (
    ("os.listdir", ((0, -1),), True),
    ("os.scandir", ((0, -1),), True),
    ("os.mkdir", ((0, 2),), False),
    ("os.remove", ((0, 1),), False),
    ("os.rmdir", ((0, 1),), False),
    ("os.rename", ((0, 2), (1, 3)), False),
    ("os.link", ((0, 2), (1, 3)), False),
    ("os.symlink", ((1, 2),), False),  # the link itself; opening it later resolves the target
    ("os.chmod", ((0, 2),), False),
    ("os.chown", ((0, 3),), False),
    ("os.utime", ((0, 3),), False),
    ("os.truncate", ((0, -1),), False),
    ("os.setxattr", ((0, -1),), False),
    ("os.removexattr", ((0, -1),), False),
    ("shutil.rmtree", ((0, 1),), False),
)
PATH_EVENT_NAMES = frozenset(entry[0] for entry in PATH_EVENTS)
PROCESS_EVENTS = frozenset((
    "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
    "os.forkpty", "os.kill", "os.killpg",
))
# Limits the child could raise again as root; a new interpreter has no hooks; gc and tracing
# reach into the hook's own objects and frames.
OTHER_EVENTS = frozenset((
    "resource.setrlimit", "resource.prlimit", "cpython.PyInterpreterState_New",
    "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys.settrace", "sys.setprofile",
))
NETWORK_PREFIXES = ("socket.", "syslog.")
# Modules that act below the hook (see the module docstring of python_runner), and the two
# whose fresh copy would bring back what is shut below.
REFUSED_MODULES = frozenset((
    "ctypes", "_ctypes", "_sqlite3", "_gdbm", "_dbm", "readline", "_tkinter",
    "_xxsubinterpreters", "_xxinterpchannels", "_posixshmem", "posix", "_posixsubprocess",
))
OWN_ATTRIBUTES = frozenset(("__code__", "__defaults__", "__kwdefaults__"))
SANDBOX_FILE = "<python_execute_sandbox>"


def breach(event, args, _real=real_path, _file_type=file_type, _work=WORK, _read=READ,
           _write_flags=WRITE_FLAGS, _path_events=PATH_EVENTS, _path_names=PATH_EVENT_NAMES,
           _processes=PROCESS_EVENTS, _others=OTHER_EVENTS, _network=NETWORK_PREFIXES,
           _modules=REFUSED_MODULES, _own=OWN_ATTRIBUTES, _sandbox_file=SANDBOX_FILE,
           _function=types.FunctionType, _type=type, _int=int, _join=str.join):
    """What ``event`` would do that the sandbox refuses, in words; None when it may."""
    if event == "open":
        path, flags = args[0], args[2]
        if _type(path) is _int:  # a descriptor: opened (and checked) before
            return None
        where = _real(path)
        kind = _file_type(where)
        if kind == 0o060000 or kind == 0o020000:  # a block or character device: raw access
            return "opening the device " + where
        if (where + "/").startswith(_work):
            return None
        if flags & _write_flags:
            return "writing " + where
        # A folder's descriptor could serve as dir_fd, which the open event does not show.
        if (where + "/").startswith(_read) and kind != 0o040000:
            return None
        return "reading " + where
    if event in _path_names:
        for name, places, may_read in _path_events:
            if name != event:
                continue
            for path_at, fd_at in places:
                where = _real(args[path_at], args[fd_at] if fd_at >= 0 else None)
                if (where + "/").startswith(_work):
                    continue
                if may_read and (where + "/").startswith(_read):
                    continue
                return event + " on " + where
        return None
    if event in _processes:
        return "starting or signalling a process (" + event + ")"
    if event.startswith(_network):
        if event == "socket.__new__" and args[1] == 1:  # AF_UNIX: asyncio's socket pair
            return None
        return "network access (" + event + ")"
    if event == "import":
        module = _join("", (args[0],))  # an exact str: a subclass could fake its hash
        return "importing " + module if module in _modules else None
    if event.startswith("ctypes."):
        return "ctypes"
    if event == "object.__setattr__":
        target, attribute = args[0], args[1]
        if (_type(target) is _function and attribute in _own
                and target.__code__.co_filename == _sandbox_file):
            return "changing the sandbox's own functions"
        return None
    if event in _others:
        return event
    return None


def audit(event, args, _breach=breach, _refuse=PermissionError, _Exception=Exception):
    # No re-entrancy guard: the checks call only C functions that raise no audit event (but a
    # harmless object.__getattr__), and a guard flag would be state the program could flip.
    try:
        what = _breach(event, args)
    except _Exception:
        what = event  # a check that cannot decide refuses
    if what is not None:
        raise _refuse("python_execute: " + what + " is not allowed in the sandbox")


def refused(what):
    def call(*args, **kwargs):
        raise PermissionError("python_execute: " + what + " is not allowed in the sandbox")
    return call


# Calls that raise no audit event: a process without subprocess.Popen, device nodes and pipes
# anywhere, a changed root that makes outside paths look inside, signals to any process.
_posixsubprocess.fork_exec = refused("starting a process")
for module in (posix, os):
    for name in ("mknod", "mkfifo", "chroot", "pidfd_open"):
        if hasattr(module, name):
            setattr(module, name, refused("os." + name))
sys.addaudithook(audit)

tree = ast.parse(program, "<python_execute_driver>")
last = ast.Expression(tree.body.pop().value)
namespace = {"__name__": "__python_execute_driver__"}
exec(compile(tree, "<python_execute_driver>", "exec"), namespace)
value = eval(compile(last, "<python_execute_driver>", "eval"), namespace)
reply = (marker + str(value) + "\n").encode()
while reply:
    reply = reply[write(result_fd, reply):]
exit_now(0)  # threads the program left running do not keep the process
'''
# The functions above need a file name that no exec() or eval() of the program or of the
# standard library (namedtuple, dataclasses) gives its own: -c would name them "<string>".
_BOOT = "import sys; exec(compile(sys.argv[1], '<python_execute_sandbox>', 'exec'))"


class SubprocessPyRunner:
    """Runs each program in a new CPython process of its own (see the module docstring)."""

    def __init__(
        self, python: str | None = None, *, max_memory_mb: int = DEFAULT_MAX_MEMORY_MB
    ) -> None:
        self.python = python or sys.executable
        self.max_memory_mb = max_memory_mb

    async def run(self, program: str, *, timeout_s: float, output_limit: int) -> PyRunResult:
        workdir = tempfile.mkdtemp(prefix="python_execute_")
        try:
            process = await asyncio.create_subprocess_exec(
                *self._command(timeout_s),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=workdir,
                # HOME and TMPDIR: tempfile and expanduser() land in the folder.
                env={"LANG": "C.UTF-8", "HOME": workdir, "TMPDIR": workdir},
                start_new_session=True,  # its own process group: one kill takes everything
            )
            try:
                stdout, stderr = await asyncio.wait_for(
                    _exchange(process, program, output_limit), timeout_s
                )
            except TimeoutError:
                return PyRunResult(timed_out=True)
            finally:
                if process.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGKILL)
                    await process.wait()
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        return _read_outcome(stdout, stderr, process.returncode)

    async def close(self) -> None:
        """Nothing to end: each run's process is gone when its run returns."""

    def _command(self, timeout_s: float) -> list[str]:
        limits = [
            math.ceil(timeout_s) + 1,  # CPU seconds: a backstop below the kill at timeout_s
            self.max_memory_mb * 1024 * 1024,
            MAX_FILE_BYTES,
            MAX_OPEN_FILES,
        ]
        return [
            self.python,
            *("-I", "-S", "-B", "-X", "utf8"),
            *("-c", _BOOT, _SANDBOX, _MARKER),
            *(str(limit) for limit in limits),
        ]


async def _exchange(
    process: asyncio.subprocess.Process, program: str, output_limit: int
) -> tuple[str, str]:
    assert process.stdin and process.stdout and process.stderr
    with contextlib.suppress(ConnectionError):  # a child that died at start reads nothing
        process.stdin.write(program.encode("utf-8"))
        await process.stdin.drain()
        process.stdin.close()
    # The driver's JSON is bounded by output_limit: up to 4 bytes a character in UTF-8, 6 for
    # an escaped control character, in four fields. Beyond that something went wrong.
    stdout, stderr = await asyncio.gather(
        _read_capped(process.stdout, output_limit * 24 + 65_536),
        _read_capped(process.stderr, 8_192, keep_end=True),
    )
    await process.wait()
    return stdout, stderr


def _read_outcome(stdout: str, stderr: str, returncode: int | None) -> PyRunResult:
    line = next((ln for ln in reversed(stdout.split("\n")) if ln.startswith(_MARKER)), None)
    if line is not None:
        return PyRunResult.from_driver(line[len(_MARKER) :])
    detail = stderr.strip().splitlines()[-1:]
    if detail:
        why = detail[0]
    elif returncode is not None and returncode < 0:
        why = signal.strsignal(-returncode) or f"signal {-returncode}"  # "CPU time limit exceeded"
    else:
        why = f"exit status {returncode}"
    return PyRunResult(error=f"the Python process ended abnormally: {why}")


async def _read_capped(stream: asyncio.StreamReader, cap: int, *, keep_end: bool = False) -> str:
    """All of ``stream``, of which at most ``cap`` bytes are kept: the first ones, or the last
    (the end of stderr says why a process died)."""
    kept = bytearray()
    while chunk := await stream.read(65_536):
        if keep_end:
            kept = (kept + chunk)[-cap:]
        elif len(kept) < cap:
            kept += chunk[: cap - len(kept)]
    return kept.decode("utf-8", errors="replace")
