"""Run a command in a sandbox: bubblewrap (``bwrap``) with limits. Used by tools/grade.py.

What the sandboxed command gets:

- **Another user.** bwrap makes a user namespace in which the command is user 65534
  (``nobody``), with no capabilities, and forbids user namespaces inside it
  (``--disable-userns``, bwrap 0.8 on), so student code cannot mount a tmpfs of its own.
  Run by anyone but root, that user is the caller's outside. Run by root (a container, a
  grading server), ``setpriv`` first drops to user 65534 (``no_new_privs``, the parent-death
  signal kept) and bwrap runs as that user, so the namespace's user is nobody outside too (one
  made by root would be root outside); the folders bwrap binds, which user 65534 may not be
  able to reach (``/root``, a 0700 temporary folder), are first bind-mounted by root, in a
  mount namespace of the sandbox's own, under a folder it may enter (:func:`run`).
  :func:`root_userns` tries this once; where it fails (unprivileged user namespaces off, as
  AppArmor has them on Ubuntu 24.04, or bwrap before 0.8) root's bwrap sets up the sandbox
  without a user namespace and ``setpriv`` drops to user 65534 inside it, as before: nested
  user namespaces are then allowed, a tmpfs of the student's own is bounded by the sandbox's
  memory cgroup only, not by ``tmp_bytes``, and :attr:`Finished.note` says so.
- **A read-only view of the system and of attnlib**, and nothing else: ``/usr`` and ``/etc``
  (with ``/bin``, ``/lib``... as on the machine), the Python installation, attnlib's package
  folder, and the folder ``IN``: a read-only copy of the caller's input folder, each file
  copied in through a file descriptor, so no mount names a host folder of the grader's in
  ``/proc/self/mountinfo`` (those bound read-only show the paths they have inside). The one writable place is a private ``/tmp`` of
  at most ``tmp_bytes``, in memory, gone with the sandbox (``OUT``, a host folder, only where a
  caller asks for one; tools/grade.py does not). The caller's home, the submissions, the CSV
  and the grader's working folders are not there at all. Standard output and error, and a
  report (:data:`REPORT_FD`), go back over pipes: no host path shows in ``/proc/<pid>/fd``.
- **No network** (a new network namespace: loopback only), its own IPC, hostname and
  **process-ID namespace**: its processes see only each other, and when the command ends
  or is killed, the kernel kills every process of the sandbox, daemons included
  (``--unshare-pid``, ``--die-with-parent``; the command is the namespace's only way to live).
- **A clean environment** (``--clearenv``): only the variables the caller passes.
- **Limits** (:class:`Limits`): wall-clock time (the caller kills the sandbox); for the sandbox
  in all, a cgroup of its own where the machine lets this process make one (:class:`Cgroup`:
  cgroup v2, or v1's memory and pids controllers): memory (``memory_bytes`` plus ``tmp_bytes``:
  its processes, its /tmp and memfd files together) and processes; per process too: memory
  (``RLIMIT_DATA``: the heap and anonymous mappings, which is where a memory bomb goes;
  ``RLIMIT_AS`` would count torch's reserved address space), CPU seconds, processes and
  threads (``RLIMIT_NPROC``, per user: as root, user 65534's processes on the machine;
  otherwise the caller's, counted from what it runs now), file size, core dumps off.
  :attr:`Finished.note` says which limits for the sandbox in all could not be had (and
  :data:`USERNS_NOTE`, where nested user namespaces could not be forbidden).

Needs: Linux, ``bwrap`` (Debian/Ubuntu package ``bubblewrap``) and, as root, ``setpriv``
(util-linux); without root, unprivileged user namespaces (the default on most distributions;
as root they are what forbids nested ones).
:func:`unavailable` says why the sandbox cannot run here, or None.
"""
from __future__ import annotations

import contextlib

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

SANDBOX_UID = 65534  # nobody
IN, OUT, TMP = "/grade-in", "/grade-out", "/tmp"
_SYSTEM_DIRS = ("/usr", "/etc")
_TOP_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


@dataclass(frozen=True)
class Limits:
    """What one sandboxed run may use (see the module's docstring)."""

    wall_s: float = 180.0
    memory_bytes: int = 4 * 2**30  # per process (RLIMIT_DATA)
    processes: int = 256  # processes and threads (RLIMIT_NPROC)
    cpu_s: int = 600  # per process (RLIMIT_CPU)
    file_bytes: int = 256 * 2**20  # any one file written (RLIMIT_FSIZE)
    tmp_bytes: int = 512 * 2**20  # the sandbox's /tmp

    def __post_init__(self):
        for name in ("wall_s", "memory_bytes", "processes", "cpu_s", "file_bytes", "tmp_bytes"):
            if not getattr(self, name) > 0:
                raise ValueError(f"Limits.{name} must be positive, got {getattr(self, name)!r}")


def is_root() -> bool:
    return os.geteuid() == 0


def bwrap() -> str | None:
    return shutil.which("bwrap")


def python_paths() -> list[str]:
    """The folders the running Python needs: its installation, its virtual environment, its executable's."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             str(Path(sys.executable).parent), str(Path(os.path.realpath(sys.executable)).parent)}
    return sorted(p for p in paths if p and Path(p).is_dir() and not any(p.startswith(s + "/") for s in _SYSTEM_DIRS))


def _parents(path: str) -> list[str]:
    parts = Path(path).parts[1:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


@lru_cache(maxsize=1)
def can_disable_userns() -> bool:
    """Whether this bwrap has ``--disable-userns`` (0.8 on): no user namespace inside the sandbox."""
    tool = bwrap()
    try:
        return tool is not None and "--disable-userns" in subprocess.run(
            [tool, "--help"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return False


#: The row's sandbox column, where student code may make a user namespace (and so a tmpfs of its own).
USERNS_NOTE = "nested user namespaces allowed here: a tmpfs of the student's own is bounded by the memory cgroup only"

_NESTED_PROBE = ("import ctypes, os; refused = ctypes.CDLL(None, use_errno=True).unshare(0x10000000) != 0; "
                 "print(os.getuid(), 'refused' if refused else 'allowed')")  # CLONE_NEWUSER


@lru_cache(maxsize=1)
def root_userns() -> bool:
    """As root: whether dropping to user 65534 before bwrap works here (the sandbox then has a user
    namespace of nobody's, with nested ones forbidden). Unprivileged user namespaces may be off
    (a sysctl, AppArmor on Ubuntu 24.04), or bwrap older than 0.8; then the sandbox is set up by
    root without one, nested user namespaces stay allowed, and :attr:`Finished.note` says so.
    Tried once, with a small sandbox like the grader's."""
    if not (is_root() and bwrap() is not None and can_disable_userns() and shutil.which("setpriv")):
        return False
    try:
        with tempfile.TemporaryDirectory(prefix="attnlib-userns-check-") as work:
            in_dir = Path(work, "in")
            in_dir.mkdir()
            cmd = command([sys.executable, "-c", _NESTED_PROBE], read_only=python_paths(), in_dir=in_dir,
                          env={"PATH": "/usr/bin:/bin"}, limits=Limits(wall_s=60), userns=True)
            said = bytearray()
            done = run(cmd, Limits(wall_s=60), Path(work, "log"), output=said, max_output=100)
            return done.returncode == 0 and said.decode("ascii", "replace").split() == [str(SANDBOX_UID), "refused"]
    except (OSError, subprocess.SubprocessError):
        return False


def command(argv: list[str], *, read_only: list[str], in_dir: Path, out_dir: Path | None = None,
            env: dict[str, str], limits: Limits, cwd: str = TMP, hidden: list[str] = (),
            emptied: list[str] = (), userns: bool | None = None) -> list[str]:
    """The bwrap command line that runs ``argv`` in the sandbox; ``in_dir`` appears at :data:`IN`
    (read-only), ``out_dir`` (if any) at :data:`OUT` (writable), each of ``read_only`` at its own
    path; each file of ``hidden`` reads as empty there and each folder of ``emptied`` as empty.
    ``userns`` (as root): drop to user 65534 before bwrap and let it make a user namespace with
    nested ones forbidden (True), or not (False); None: where :func:`root_userns` found it works.
    Run it with :func:`run`: as root, that mounts the folders bound where user 65534's bwrap can reach them."""
    tool = bwrap()
    if tool is None:
        raise RuntimeError("bwrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)")
    cmd = [tool, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net", "--unshare-ipc",
           "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox", "--clearenv"]
    for top in _TOP_LINKS:
        if os.path.islink(top):
            cmd += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            cmd += ["--ro-bind", top, top]
    # the private /tmp first: a read-only folder that lives under /tmp (a checkout or virtual environment
    # in /tmp, as CI's may be) is then bound on top of it, not hidden by it
    cmd += ["--perms", "01777", "--size", str(limits.tmp_bytes), "--tmpfs", TMP]
    made, bound = {TMP}, []
    for path in sorted({os.path.realpath(p) for p in [*_SYSTEM_DIRS, *read_only]}, key=lambda p: (len(p), p)):
        if any(path == b or path.startswith(b + "/") for b in bound):
            continue  # already visible through a folder above it
        bound.append(path)
        for parent in _parents(path):
            if parent not in made:
                made.add(parent)
                cmd += ["--perms", "0755", "--dir", parent]
        cmd += ["--ro-bind", path, path]
    for path in hidden:  # after the folders above them: an empty file over each
        cmd += ["--ro-bind", "/dev/null", path]
    for path in emptied:
        cmd += ["--perms", "0555", "--size", "4096", "--tmpfs", path, "--remount-ro", path]
    cmd += ["--proc", "/proc", "--dev", "/dev", *_input_copy(Path(in_dir))]
    if out_dir is not None:
        cmd += ["--bind", str(out_dir), OUT]
    cmd += ["--chdir", cwd]
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    if is_root() and (userns if userns is not None else root_userns()):
        # nobody before bwrap: bwrap's user namespace is then made by user 65534 (its user is nobody
        # outside too) and forbids user namespaces inside it; :func:`run` sees to the bind sources
        setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
        cmd = [setpriv, f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups", "--inh-caps=-all",
               "--no-new-privs", "--pdeathsig=keep", "--", *cmd,
               "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--disable-userns", "--"]
    elif is_root():  # not bwrap's user namespace: made by root, its user would be root outside
        setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
        cmd += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--",
                setpriv, f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups", "--no-new-privs", "--"]
    else:  # and no user namespace inside this one, where bwrap can forbid it: no tmpfs of the student's own
        cmd += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
                *(["--disable-userns"] if can_disable_userns() else []), "--"]
    return cmd + list(argv)


def _user_processes(uid: int) -> int:
    """Processes and threads that ``uid`` runs now (what RLIMIT_NPROC counts)."""
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += len(list((entry / "task").iterdir()))
            except OSError:
                continue
    return count


class Cgroup:
    """A control group for one sandbox, where the machine lets this process make one: memory
    (the sandbox's processes, its /tmp and memfd files together) and processes, for the sandbox
    in all, not per process. ``note`` says when none could be had here (then only the
    per-process rlimits hold)."""

    ROOT = Path("/sys/fs/cgroup")

    def __init__(self, limits: Limits, name: str):
        self.paths, self.procs_files, self.missing = [], [], []
        memory = limits.memory_bytes + limits.tmp_bytes
        controllers = self.ROOT / "cgroup.controllers"
        try:
            if controllers.is_file() and {"memory", "pids"} <= set(controllers.read_text().split()):
                path = self.ROOT / name
                path.mkdir()
                self.paths.append(path)
                (path / "memory.max").write_text(str(memory))
                if (path / "memory.swap.max").exists():
                    (path / "memory.swap.max").write_text("0")
                (path / "pids.max").write_text(str(limits.processes))
                self.procs_files.append(path / "cgroup.procs")
                return
        except OSError:
            self.close()
            self.paths, self.procs_files = [], []
        for controller, settings in (("memory", {"memory.limit_in_bytes": memory}),
                                     ("pids", {"pids.max": limits.processes})):
            path = self.ROOT / controller / name
            try:
                path.mkdir()
                self.paths.append(path)
                for key, value in settings.items():
                    (path / key).write_text(str(value))
                self.procs_files.append(path / "cgroup.procs")
            except OSError:
                self.missing.append(controller)

    def enter(self) -> None:
        """Put the calling process (the sandbox, just forked) into this group."""
        for procs in self.procs_files:
            with open(procs, "w") as f:
                f.write(str(os.getpid()))

    def close(self) -> None:
        """Remove the group (its processes have been killed; any left are killed here)."""
        for path in self.paths:
            for _ in range(50):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    try:
                        for pid in (path / "cgroup.procs").read_text().split():
                            os.kill(int(pid), signal.SIGKILL)
                    except (OSError, ValueError):
                        pass
                    time.sleep(0.1)

    @property
    def note(self) -> str:
        """What the row's sandbox column says when the limits for the sandbox in all could not be had."""
        if self.procs_files and not self.missing:
            return ""
        return f"no {' or '.join(self.missing) or 'memory or pids'} cgroup here: memory and processes limited per process only"


def _set_limits(limits: Limits, nproc: int, cgroup: Cgroup | None = None, stage: tuple | None = None):
    def apply():
        try:  # bwrap dies with the grader, whatever kills it (its sandbox then dies with bwrap)
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
        if cgroup is not None:
            cgroup.enter()
        if stage is not None:
            _stage(*stage)
        for which, value in ((resource.RLIMIT_DATA, limits.memory_bytes), (resource.RLIMIT_CPU, limits.cpu_s),
                             (resource.RLIMIT_FSIZE, limits.file_bytes), (resource.RLIMIT_CORE, 0),
                             (resource.RLIMIT_NPROC, nproc)):
            resource.setrlimit(which, (value, value))

    return apply


@dataclass(frozen=True)
class Finished:
    returncode: int | None  # None when it was killed at the time limit
    seconds: float
    note: str = ""  # limits that could not be had on this machine (for the row's sandbox column)
    overflow: bool = False  # its standard output (``output``) went past ``max_output``


def prepare_out(out_dir: Path) -> None:
    """Make ``out_dir`` writable by the sandbox's user."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if is_root():
        os.chown(out_dir, SANDBOX_UID, SANDBOX_UID)
    os.chmod(out_dir, 0o755)


#: The most bytes of a sandbox's standard output and error kept in its log.
MAX_LOG_BYTES = 1 << 20


class _Drain(threading.Thread):
    """Copies a pipe into a file or a bytearray, ``limit`` bytes at most; reads on and drops the rest
    (``last``: keeps the last ``limit`` bytes instead, in a bytearray)."""

    def __init__(self, pipe, sink, limit: int, last: bool = False):
        super().__init__(daemon=True)
        self.pipe, self.sink, self.limit, self.overflow, self.last = pipe, sink, limit, False, last
        self.start()

    def run(self):
        kept = 0
        try:
            while chunk := self.pipe.read1(65536) if hasattr(self.pipe, "read1") else self.pipe.read(65536):
                if self.last:
                    self.sink.extend(chunk)
                    del self.sink[: max(0, len(self.sink) - self.limit)]
                    continue
                part = chunk[: max(0, self.limit - kept)]
                self.overflow = self.overflow or len(part) < len(chunk)
                kept += len(part)
                if part:
                    (self.sink.extend if isinstance(self.sink, bytearray) else self.sink.write)(part)
        except (OSError, ValueError):
            pass
        finally:
            self.pipe.close()


def _bwrap_at(cmd: list[str]) -> int:
    """Where bwrap is in ``cmd``: first, or after setpriv's options (as root, nobody before bwrap)."""
    return cmd.index("--") + 1 if Path(cmd[0]).name == "setpriv" else 0


def _argfile(cmd: list[str], args) -> tuple[list[str], tuple]:
    """bwrap reads its options from a file: its process in the sandbox shows no path."""
    at = _bwrap_at(cmd)
    split = cmd.index("--", at + 1)  # the options; the command itself stays on the command line
    args.write(b"".join(os.fsencode(a) + b"\0" for a in cmd[at + 1:split]))
    args.flush()
    args.seek(0)
    return [*cmd[:at + 1], "--args", str(args.fileno()), *cmd[split:]], (args.fileno(),)


#: bwrap's options that command() writes, and how many values each takes (the rest take none).
_VALUES = {"--symlink": 2, "--ro-bind": 2, "--bind": 2, "--setenv": 2, "--perms": 1, "--size": 1, "--tmpfs": 1,
           "--dir": 1, "--remount-ro": 1, "--proc": 1, "--dev": 1, "--chdir": 1, "--hostname": 1, "--uid": 1,
           "--gid": 1, "--cap-add": 1, "--file": 2}


#: In a command from :func:`command`: a placeholder that :func:`run` replaces with the number of a
#: file descriptor open on the file named after it (bwrap's ``--file FD DEST`` copies it in).
_FILE_FD = "{fd-for}"


def _input_copy(in_dir: Path) -> list[str]:
    """bwrap's options that make :data:`IN` a read-only tmpfs holding a copy of ``in_dir``'s files,
    each copied in from a file descriptor (:func:`run` opens them): a bind mount would name its host
    source (the grader's temporary folder) in ``/proc/self/mountinfo``, a copy names none."""
    in_dir = Path(in_dir)
    folders, files = [], []
    for folder, subfolders, names in os.walk(in_dir, followlinks=False):
        rel = os.path.relpath(folder, in_dir)
        for name in sorted(subfolders):
            if os.path.islink(os.path.join(folder, name)):
                raise ValueError(f"the sandbox's input folder holds a link: {os.path.join(folder, name)}")
            folders.append(os.path.normpath(os.path.join(rel, name)))
        for name in sorted(names):
            path = os.path.join(folder, name)
            if os.path.islink(path) or not os.path.isfile(path):
                raise ValueError(f"the sandbox's input folder holds something not a plain file: {path}")
            files.append((os.path.normpath(os.path.join(rel, name)), path))
    size = sum(os.path.getsize(path) for _, path in files) + 4096 * (len(files) + len(folders) + 16)
    opts = ["--perms", "0755", "--size", str(size), "--tmpfs", IN]
    for rel in sorted(folders):
        opts += ["--perms", "0755", "--dir", f"{IN}/{rel}"]
    for rel, path in files:
        mode = "0555" if os.access(path, os.X_OK) else "0444"
        opts += ["--perms", mode, "--file", _FILE_FD + path, f"{IN}/{rel}"]
    return [*opts, "--remount-ro", IN]


def _open_inputs(cmd: list[str]) -> tuple[list[str], list[int]]:
    """``cmd`` with each :data:`_FILE_FD` placeholder replaced by a descriptor open on its file; those
    descriptors (the caller passes them to bwrap and closes them)."""
    fds, out = [], []
    try:
        for arg in cmd:
            if arg.startswith(_FILE_FD):
                fds.append(os.open(arg[len(_FILE_FD):], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC))
                arg = str(fds[-1])
            out.append(arg)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return out, fds


def _staged(cmd: list[str], stage: str) -> tuple[list[str], list[str]]:
    """``cmd`` (nobody before bwrap) with each bind's source replaced by ``stage``/N, and those sources.
    bwrap, run by user 65534, cannot reach a source under a folder only root may enter (``/root``,
    a 0700 temporary folder); the sandbox's process, still root, bind-mounts each source at
    ``stage``/N in a mount namespace of its own first (:func:`_stage`)."""
    at = _bwrap_at(cmd)
    out, sources, i = cmd[:at + 1], [], at + 1
    while cmd[i] != "--":
        option, count = cmd[i], _VALUES.get(cmd[i], 0)
        values = cmd[i + 1:i + 1 + count]
        if option in ("--ro-bind", "--bind"):
            values = [f"{stage}/{len(sources)}", values[1]]
            sources.append(cmd[i + 1])
        out += [option, *values]
        i += 1 + count
    return out + cmd[i:], sources


#: Where :func:`run` makes the empty folder a sandbox's bind sources are mounted on (in its own mount
#: namespace): in /tmp, which user 65534 may enter, whatever ``TMPDIR`` says (a folder it may not).
_STAGE_IN = "/tmp"


def _stage(stage: str, sources: list[str]) -> None:
    """In the sandbox's process, as root, before it drops to user 65534: a mount namespace of its own,
    a tmpfs at ``stage`` that user 65534 may enter, each of ``sources`` bind-mounted at ``stage``/N.
    (Gone with the sandbox's bwrap, the namespace's last process; the host sees none of it.)"""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def check(result, what):
        if result != 0:
            raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")

    check(libc.unshare(0x00020000), "unshare(CLONE_NEWNS)")  # CLONE_NEWNS
    check(libc.mount(b"none", b"/", None, (1 << 18) | 16384, None), "make / private")  # MS_PRIVATE | MS_REC
    check(libc.mount(b"tmpfs", stage.encode(), b"tmpfs", 2 | 8, b"mode=0755,size=65536"), "tmpfs")  # nosuid, noexec
    for n, source in enumerate(sources):
        target = f"{stage}/{n}"
        if os.path.isdir(source):
            os.mkdir(target, 0o755)
        else:
            os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
        check(libc.mount(os.fsencode(source), target.encode(), None, 4096 | 16384, None),  # MS_BIND | MS_REC
              f"bind {source}")


#: In a command for :func:`run` with ``report``: the number of the file descriptor to report on.
REPORT_FD = "{report_fd}"


def run(cmd: list[str], limits: Limits, log: Path, *, sandboxed: bool = True, stdin: bytes | None = None,
        output: bytearray | None = None, max_output: int = 0, report: bytearray | None = None,
        max_report: int = 1 << 20, env: dict | None = None) -> Finished:
    """Run ``cmd`` (from :func:`command`, or a bare command when not ``sandboxed``) under ``limits``
    (in a cgroup of its own where the machine allows); kill it at ``limits.wall_s``. Its standard
    error, and its standard output unless ``output`` is given, go to ``log`` through a pipe, so
    no path of the grader's shows in the sandbox (``/proc/<pid>/fd/1``). ``stdin``: the bytes it
    reads on standard input; ``output``: where its standard output goes, ``max_output`` bytes at
    most (the judge's answers, over a pipe the notebook never had); ``report``: what it writes to
    the file descriptor that replaces :data:`REPORT_FD` in ``cmd`` (another pipe)."""
    drop_first = sandboxed and is_root() and Path(cmd[0]).name == "setpriv"
    if sandboxed and is_root():
        nproc = limits.processes + (2 if drop_first else 0)  # user 65534's processes (and bwrap's two)
    else:
        nproc = _user_processes(os.getuid()) + limits.processes
    note = "" if not sandboxed or "--disable-userns" in cmd else USERNS_NOTE
    cgroup = Cgroup(limits, f"attnlib-grade-{os.getpid()}-{os.urandom(4).hex()}") if sandboxed else None
    start = time.monotonic()
    try:
        staging = tempfile.TemporaryDirectory(prefix="attnlib-stage-", dir=_STAGE_IN) if drop_first else \
            contextlib.nullcontext()
        with open(log, "wb") as log_file, tempfile.TemporaryFile() as args, staging as stage_dir, \
                contextlib.ExitStack() as stack:
            pass_fds, report_pipe, stage = (), None, None
            cmd, inputs = _open_inputs(cmd) if sandboxed else (cmd, [])
            stack.callback(lambda: [os.close(fd) for fd in inputs])
            if report is not None:
                report_pipe = os.pipe()
                cmd = [a.replace(REPORT_FD, str(report_pipe[1])) for a in cmd]
            if drop_first:
                cmd, sources = _staged(cmd, stage_dir)
                stage = (stage_dir, sources)
            if sandboxed:
                cmd, pass_fds = _argfile(cmd, args)
            pass_fds = (*pass_fds, *inputs)
            if report_pipe is not None:
                pass_fds = (*pass_fds, report_pipe[1])
            try:
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                                        stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT if output is None else subprocess.PIPE,
                                        start_new_session=True, preexec_fn=_set_limits(limits, nproc, cgroup, stage),
                                        pass_fds=pass_fds, env=env)
            finally:
                if report_pipe is not None:
                    os.close(report_pipe[1])
            drains = [_Drain(proc.stdout, log_file if output is None else output,
                             MAX_LOG_BYTES if output is None else max_output)]
            if output is not None:
                drains.append(_Drain(proc.stderr, log_file, MAX_LOG_BYTES))
            if report_pipe is not None:
                drains.append(_Drain(os.fdopen(report_pipe[0], "rb"), report, max_report, last=True))
            if stdin is not None:
                def feed():
                    try:
                        proc.stdin.write(stdin)
                        proc.stdin.close()
                    except OSError:  # it stopped reading: its own loss
                        pass

                threading.Thread(target=feed, daemon=True).start()
            code = None
            try:
                code = proc.wait(timeout=limits.wall_s)
            except subprocess.TimeoutExpired:
                code = None
            except BaseException:  # KeyboardInterrupt, SystemExit: the sandbox goes with the grader
                _kill(proc)
                raise
            finally:
                if proc.poll() is None or code is None:
                    _kill(proc)
            for drain in drains:
                drain.join(timeout=10)
    finally:
        if cgroup is not None:
            cgroup.close()
    return Finished(code, time.monotonic() - start, "; ".join(filter(None, [cgroup.note if cgroup else "", note])),
                    output is not None and drains[0].overflow)


def _kill(proc: subprocess.Popen) -> None:
    """Kill the sandbox: bwrap's process group; its processes inside then die with its PID namespace."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def unavailable(read_only: list[str]) -> str | None:
    """Why the sandbox cannot run on this machine (bwrap missing or failing), or None when it can."""
    if not sys.platform.startswith("linux"):
        return "the sandbox needs Linux (bubblewrap)"
    if bwrap() is None:
        return "bwrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    with tempfile.TemporaryDirectory(prefix="attnlib-sandbox-check-") as work:
        in_dir = Path(work, "in")
        in_dir.mkdir()
        probe = [sys.executable, "-c", "import os; print(os.getuid())"]
        cmd = command(probe, read_only=read_only, in_dir=in_dir, env={"PATH": "/usr/bin:/bin"},
                      limits=Limits(wall_s=60))
        said = bytearray()
        done = run(cmd, Limits(wall_s=60), Path(work, "log"), output=said, max_output=100)
        if done.returncode != 0 or said.decode("ascii", "replace").strip() != str(SANDBOX_UID):
            tail = Path(work, "log").read_bytes()[-400:].decode("utf-8", "replace").strip()
            return f"bwrap cannot start a sandbox here (exit status {done.returncode}): {tail}"
    return None
