"""Run a command in a sandbox: bubblewrap (``bwrap``) with limits. Used by tools/grade.py.

What the sandboxed command gets:

- **Another user.** Run by root (a container, a grading server), bwrap sets up the sandbox
  without a user namespace and ``setpriv`` then drops to the unprivileged user 65534
  (``nobody``) with no capabilities and ``no_new_privs``. Run by anyone else, bwrap makes a
  user namespace in which the command is user 65534 (outside, still the caller's user).
- **A read-only view of the system and of attnlib**, and nothing else: ``/usr`` and ``/etc``
  (with ``/bin``, ``/lib``... as on the machine), the Python installation, attnlib's package
  folder, and the folder ``IN`` (read-only). The one writable place is ``OUT`` (plus a
  private ``/tmp`` of at most ``tmp_bytes``, in memory, gone with the sandbox). The caller's
  home, the submissions, the CSV and the grader's working folders are not there at all.
- **No network** (a new network namespace: loopback only), its own IPC, hostname and
  **process-ID namespace**: its processes see only each other, and when the command ends
  or is killed, the kernel kills every process of the sandbox, daemons included
  (``--unshare-pid``, ``--die-with-parent``; the command is the namespace's only way to live).
- **A clean environment** (``--clearenv``): only the variables the caller passes.
- **Limits** (:class:`Limits`): wall-clock time (the caller kills the sandbox), memory per
  process (``RLIMIT_DATA``: the heap and anonymous mappings, which is where a memory bomb goes;
  ``RLIMIT_AS`` would count torch's reserved address space), CPU seconds per process,
  processes and threads (``RLIMIT_NPROC``, per user: as root, user 65534's processes on the
  machine; otherwise the caller's, counted from what it runs now), file size, core dumps off.

Needs: Linux, ``bwrap`` (Debian/Ubuntu package ``bubblewrap``) and, as root, ``setpriv``
(util-linux); without root, unprivileged user namespaces (the default on most distributions).
:func:`unavailable` says why the sandbox cannot run here, or None.
"""
from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
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


def command(argv: list[str], *, read_only: list[str], in_dir: Path, out_dir: Path, env: dict[str, str],
            limits: Limits, cwd: str = TMP) -> list[str]:
    """The bwrap command line that runs ``argv`` in the sandbox; ``in_dir`` appears at :data:`IN`
    (read-only), ``out_dir`` at :data:`OUT` (writable), each of ``read_only`` at its own path."""
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
    cmd += ["--proc", "/proc", "--dev", "/dev", "--ro-bind", str(in_dir), IN, "--bind", str(out_dir), OUT,
            "--chdir", cwd]
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    if is_root():
        setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
        cmd += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--",
                setpriv, f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups", "--no-new-privs", "--"]
    else:
        cmd += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--"]
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


def _set_limits(limits: Limits, nproc: int):
    def apply():
        try:  # bwrap dies with the grader, whatever kills it (its sandbox then dies with bwrap)
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
        for which, value in ((resource.RLIMIT_DATA, limits.memory_bytes), (resource.RLIMIT_CPU, limits.cpu_s),
                             (resource.RLIMIT_FSIZE, limits.file_bytes), (resource.RLIMIT_CORE, 0),
                             (resource.RLIMIT_NPROC, nproc)):
            resource.setrlimit(which, (value, value))

    return apply


@dataclass(frozen=True)
class Finished:
    returncode: int | None  # None when it was killed at the time limit
    seconds: float


def prepare_out(out_dir: Path) -> None:
    """Make ``out_dir`` writable by the sandbox's user."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if is_root():
        os.chown(out_dir, SANDBOX_UID, SANDBOX_UID)
    os.chmod(out_dir, 0o755)


def run(cmd: list[str], limits: Limits, log: Path, *, sandboxed: bool = True) -> Finished:
    """Run ``cmd`` (from :func:`command`, or a bare command when not ``sandboxed``) under ``limits``;
    kill it at ``limits.wall_s``. Its standard output and error go to ``log``."""
    if sandboxed and is_root():
        nproc = limits.processes  # user 65534's processes
    else:
        nproc = _user_processes(os.getuid()) + limits.processes
    start = time.monotonic()
    with open(log, "wb") as out, tempfile.TemporaryFile() as args:
        pass_fds = ()
        if sandboxed:  # bwrap reads its arguments from a file: its process in the sandbox shows no path
            split = cmd.index("--")  # the options; the command itself stays on the command line
            args.write(b"".join(os.fsencode(a) + b"\0" for a in cmd[1:split]))
            args.flush()
            args.seek(0)
            cmd, pass_fds = [cmd[0], "--args", str(args.fileno()), *cmd[split:]], (args.fileno(),)
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=_set_limits(limits, nproc), pass_fds=pass_fds)
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
    return Finished(code, time.monotonic() - start)


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
        in_dir, out_dir = Path(work, "in"), Path(work, "out")
        in_dir.mkdir()
        prepare_out(out_dir)
        probe = [sys.executable, "-c", f"import os; open('{OUT}/ok', 'w').write(str(os.getuid()))"]
        cmd = command(probe, read_only=read_only, in_dir=in_dir, out_dir=out_dir, env={"PATH": "/usr/bin:/bin"},
                      limits=Limits(wall_s=60))
        done = run(cmd, Limits(wall_s=60), Path(work, "log"))
        ok = out_dir / "ok"
        if done.returncode != 0 or not ok.is_file() or ok.read_text() != str(SANDBOX_UID):
            tail = Path(work, "log").read_bytes()[-400:].decode("utf-8", "replace").strip()
            return f"bwrap cannot start a sandbox here (exit status {done.returncode}): {tail}"
    return None
