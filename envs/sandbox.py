"""Per-episode sandboxes: every command an agent runs goes through here.

Isolation comes from bubblewrap (Debian's `bubblewrap`, no daemon): a fresh
user, pid, network, ipc and uts namespace per command, the system read-only,
the episode's workspace the only writable place (at /app, Terminal-Bench's
working directory), a private /tmp, no network at all. Resource limits are
rlimits set before bwrap starts, so they bind everything inside: address space,
CPU time, file size, and processes. The process limit counts per real uid,
so each sandbox runs as a uid of its own, leased through a lock file: a fork
bomb exhausts only its own sandbox, and one episode cannot read another's
workspace (0700, another owner). A command past its wall-clock limit is killed
with its whole process tree (the pid namespace dies with bwrap).

Disk use has a byte budget per workspace, per pool and a free-space reserve on the file system (rlimits only
bound one file): a watchdog measures the workspace while a command runs and once after it; past a budget the
command is killed, the files it wrote are removed until the workspace is back under, and the command reports
why (limit "disk"). Measuring works the same sandboxed and unsandboxed (a size-limited mount would need root
and a loop device per workspace). The private /tmp is a tmpfs capped at the workspace budget.

`unsandboxed` mode exists for machines without namespaces, only when the user
asks for it: commands then run as this user, in the workspace, with rlimits only.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal, NamedTuple

import structlog
from pydantic import BaseModel

from openclaw_rl.procs import become_subreaper, reap_orphans, tracked_popen, untrack
from openclaw_rl.settings import SandboxLimits

log = structlog.get_logger(__name__)

__all__ = [
    "CommandResult",
    "Sandbox",
    "SandboxLimits",
    "SandboxPool",
    "SandboxUnavailable",
    "WorkspaceUnreachable",
    "sandbox_problem",
    "workspace_problem",
]

INSIDE_WORKSPACE = "/app"
UID_BASE = 61000
UID_SLOTS = 4096
UID_LOCKS = Path(tempfile.gettempdir()) / "openclaw-rl-sandbox-uids"
"""One lock file per sandbox uid, machine-wide: every env worker on the machine leases from the same set."""
PROBE_UID = UID_BASE + UID_SLOTS - 1
"""Never leased: the start-up probes run as it."""
ROOT_ENV = "OPENCLAW_RL_ENVS__SANDBOX__ROOT"
PRLIMIT = shutil.which("prlimit") or "/usr/bin/prlimit"
"""util-linux's (Essential in Debian): sets a command's resource limits, then runs it."""
WATCH_MIN_S = 0.05
"""Shortest pause between two measurements of a running command's workspace: a small workspace is looked at 20
times a second, so a writer at disk speed (~1-2 GB/s into the page cache) gains ~100 MB past a budget at most before
it is killed (and the cut after it removes that too)."""
_SIG_EXIT = {128 + signal.SIGXCPU: "cpu_time", 128 + signal.SIGXFSZ: "file_size", 128 + signal.SIGKILL: "killed"}


class CommandResult(BaseModel):
    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    limit: Literal["wall_clock", "cpu_time", "file_size", "memory", "processes", "killed", "disk"] | None = None
    """Which limit stopped the command, when one did (read from the exit status and the error text)."""
    truncated: bool = False
    reason: str | None = None
    """Why the limit stopped it, in words, when the sandbox knows more than the limit's name (the disk budgets)."""

    def report(self) -> str:
        """The command's result as the agent reads it: output, errors, and why it was stopped."""
        parts = [self.stdout.rstrip("\n")] if self.stdout.strip() else []
        if self.stderr.strip():
            parts.append(self.stderr.rstrip("\n"))
        if self.limit:
            why = f": {self.reason}" if self.reason else ""
            parts.append(f"[sandbox: stopped by the {self.limit.replace('_', ' ')} limit{why}]")
        return "\n".join(parts)


class _Over(NamedTuple):
    """A disk budget a workspace passed: in words, and the size the workspace must be cut back to."""

    why: str
    back_to: int


class DiskBudgetExceeded(ValueError):
    """A file written from the host (`Sandbox.write_file`) would take the workspace past a disk budget."""


class SandboxUnavailable(RuntimeError):
    """No isolation can be had here (bwrap missing, namespaces refused) and unsandboxed mode was not chosen."""


class WorkspaceUnreachable(RuntimeError):
    """The sandbox's uid cannot reach its workspace on the host (envs.sandbox.root under a folder it may not
    traverse, or the workspace gone): a misconfigured machine, never the agent's doing, so never an outcome."""


class PathOutsideWorkspace(ValueError):
    pass


def sandbox_problem() -> str | None:
    """Why bubblewrap sandboxes cannot run on this machine, or None when they can."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed: `apt-get install bubblewrap` (make install does it as root)"
    if not Path(PRLIMIT).exists():
        return "prlimit (util-linux) is not installed: `apt-get install util-linux`"
    probe = subprocess.run(
        [bwrap, "--unshare-all", "--die-with-parent", *_system_binds(), "--", "/bin/true"],
        capture_output=True,
        text=True,
        timeout=30,
        **(_as_uid(PROBE_UID) if os.geteuid() == 0 else {}),
    )
    if probe.returncode != 0:
        return f"bubblewrap cannot create namespaces here: {probe.stderr.strip()[:300]}"
    return None


def workspace_problem(root: Path) -> str | None:
    """Why sandboxes cannot work in workspaces under `root`, or None when they can (bwrap mode, as root).

    A workspace is bound into the sandbox by bwrap running as the sandbox's uid, so every parent of `root` must let
    that uid through. When one does not (a 0700 home directory), a task without a setup script would not fail: every
    command, the checker's too, would fail to start and each episode would score a silent 0. So a sandbox uid makes,
    writes and removes a file in a fresh workspace under `root`, as every episode's commands will.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o711)  # as SandboxPool: the sandbox uids traverse it, never list it
    workspace = Path(tempfile.mkdtemp(prefix="probe-", dir=root))
    try:
        os.chown(workspace, PROBE_UID, PROBE_UID)
        os.chmod(workspace, 0o700)
        cmd = ["/bin/bash", "-c", "touch .probe && rm .probe"]
        probe = subprocess.run(
            _bwrap_argv(shutil.which("bwrap") or "bwrap", workspace, cmd, {}, {}),
            capture_output=True,
            text=True,
            timeout=30,
            cwd="/",
            **_as_uid(PROBE_UID),
        )
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    if probe.returncode == 0:
        return None
    return (
        f"sandboxes cannot use their workspaces under envs.sandbox.root={root}: a sandbox uid writing in one got"
        f" {(probe.stderr or probe.stdout).strip()[:300]!r}. {_reach_fix(root)}"
    )


class Sandbox:
    """One episode's workspace and the commands run in it. Not thread-safe: one episode, one caller."""

    def __init__(self, pool: SandboxPool, workspace: Path, uid: int | None, lock_fd: int | None):
        self.pool = pool
        self.workspace = workspace
        self.uid = uid
        self._lock_fd = lock_fd
        self.closed = False

    @property
    def limits(self) -> SandboxLimits:
        return self.pool.limits

    def run(
        self,
        command: str,
        *,
        wall_s: float | None = None,
        stdin: str | None = None,
        ro_binds: dict[Path, str] | None = None,
        rw_binds: dict[Path, str] | None = None,
    ) -> CommandResult:
        """Run `command` with bash in the workspace.

        `ro_binds` / `rw_binds` map host paths to paths inside (e.g. a task's checker tests).
        """
        if self.closed:
            raise RuntimeError("the sandbox is closed")
        wall = wall_s or self.limits.wall_s
        with tempfile.TemporaryDirectory(prefix="oc-out-") as out_dir:
            out, err = Path(out_dir) / "stdout", Path(out_dir) / "stderr"
            argv = self._limited(self._argv(["/bin/bash", "-c", command], ro_binds or {}, rw_binds or {}))
            before = self.disk_used()
            started_at = time.time()
            started = time.monotonic()
            with open(out, "wb") as fo, open(err, "wb") as fe:
                proc = tracked_popen(
                    argv,
                    stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                    stdout=fo,
                    stderr=fe,
                    cwd=self.workspace,
                    env=self._env(),
                    start_new_session=True,  # its own process group: killed whole at the wall-clock limit
                    **(_as_uid(self.uid) if self.uid is not None else {}),
                )
                # A timer kills at the wall clock while this thread blocks in waitpid: Popen's own timeout polls with
                # sleeps of up to 50 ms, which every command would pay on top of its run time.
                timed_out = threading.Event()
                timer = threading.Timer(wall, lambda: (timed_out.set(), self._kill(proc)))
                timer.start()
                finished = threading.Event()
                over: list[_Over] = []  # the budget the watchdog killed the command at, when it did
                watchdog = threading.Thread(
                    target=self._watch_disk, args=(proc, before, finished, over), name="sandbox-disk", daemon=True
                )
                watchdog.start()
                try:
                    proc.communicate(input=stdin.encode() if stdin is not None else None)
                finally:
                    timer.cancel()
                    finished.set()
                    watchdog.join()
                    untrack(proc.pid)
            duration = time.monotonic() - started
            reap_orphans()
            # Once more after it: a command can write its bytes between two looks of the watchdog.
            past = over[0] if over else self._over_budget(self.disk_used(), before)
            if past:
                self._cut(started_at, past)
            stdout, t1 = _read_clipped(out, self.limits.output_chars)
            stderr, t2 = _read_clipped(err, self.limits.output_chars)
        code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
        if past:
            return CommandResult(
                exit_code=code or 1,
                stdout=stdout,
                stderr=stderr,
                duration_s=round(duration, 3),
                limit="disk",
                reason=f"the command passed {past.why}; files it wrote were removed to bring the workspace back under",
                truncated=t1 or t2,
            )
        return CommandResult(
            exit_code=124 if timed_out.is_set() else code,
            stdout=stdout,
            stderr=stderr,
            duration_s=round(duration, 3),
            limit="wall_clock" if timed_out.is_set() else _limit_from(code, stderr),
            truncated=t1 or t2,
        )

    def disk_used(self) -> int:
        """Bytes the workspace holds on disk now (allocated blocks, each inode once), recorded with the pool."""
        used = _tree_bytes(self.workspace)
        self.pool._record_use(self.workspace, used)
        return used

    def path(self, rel: str) -> Path:
        """A workspace path on the host, refusing anything that resolves outside the workspace."""
        inside = rel[len(INSIDE_WORKSPACE) + 1 :] if rel.startswith(INSIDE_WORKSPACE + "/") else rel
        target = (self.workspace / inside.lstrip("/")).resolve()
        if target != self.workspace and self.workspace not in target.parents:
            raise PathOutsideWorkspace(f"{rel!r} is outside the workspace {INSIDE_WORKSPACE}")
        return target

    def write_file(self, rel: str, content: str | bytes) -> Path:
        """Write a file into the workspace (owned by the sandbox's uid), creating folders as needed."""
        target = self.path(rel)
        if len(content) > self.limits.file_size_mb * 1024 * 1024:
            raise ValueError(f"{rel}: {len(content)} bytes is over the sandbox's file size limit")
        before = self.disk_used()
        past = self._over_budget(before + len(content), before)
        if past:
            raise DiskBudgetExceeded(f"{rel}: {len(content)} bytes would take the workspace past {past.why}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode() if isinstance(content, str) else content)
        self._own(target)
        return target

    def read_file(self, rel: str, max_chars: int | None = None) -> str:
        target = self.path(rel)
        text = target.read_bytes()[: (max_chars or self.limits.output_chars) * 4].decode("utf-8", errors="replace")
        return text[: max_chars or self.limits.output_chars]

    def copy_in(self, source: Path, rel: str = ".") -> None:
        """Copy a host folder's contents (task files) into the workspace, owned by the sandbox's uid."""
        target = self.path(rel)
        shutil.copytree(source, target, dirs_exist_ok=True, symlinks=True)
        self._own(target)

    def unreachable(self) -> str | None:
        """Why this sandbox's uid cannot reach its workspace on the host, or None when it can.

        Asked when a command gave nothing to read (the checker): bwrap then failed before running it, and whether
        that is the machine's fault is told here. A `stat` as the uid needs only the workspace's parents, which
        the agent cannot change; its own chmod of /app is its own doing and still scores.
        """
        if self.uid is None:  # unsandboxed: commands run as this process's user, in the workspace
            return None if self.workspace.is_dir() else f"the workspace {self.workspace} is gone"
        res = subprocess.run(
            ["/usr/bin/stat", "-c", "%F", "--", str(self.workspace)],
            capture_output=True,
            text=True,
            timeout=30,
            cwd="/",
            env={"PATH": "/usr/bin:/bin", "LANG": "C"},
            **_as_uid(self.uid),
        )
        if res.returncode == 0:
            return None
        return (
            f"sandbox uid {self.uid} cannot reach its workspace {self.workspace}: {res.stderr.strip()[:300]}."
            f" {_reach_fix(self.pool.root)}"
        )

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.uid is not None:
            _kill_uid(self.uid)
            reap_orphans()
        shutil.rmtree(self.workspace, ignore_errors=True)
        self.pool._record_use(self.workspace, None)
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the uid lease

    # ---- internals ----------------------------------------------------------------
    def _over_budget(self, used: int, before: int) -> _Over | None:
        """Which disk budget a workspace of `used` bytes (`before` when the command started) is past, or None."""
        lim, mb = self.limits, 1024 * 1024
        if used > lim.workspace_disk_mb * mb:
            why = f"the workspace's disk budget of {lim.workspace_disk_mb} MB ({used // mb} MB written)"
            return _Over(why, lim.workspace_disk_mb * mb)
        others = self.pool._others_use(self.workspace)
        if others + used > lim.disk_mb * mb:
            return _Over(
                f"the disk budget of all workspaces on this env worker ({lim.disk_mb} MB)", lim.disk_mb * mb - others
            )
        if used > before and _free_bytes(self.workspace) < lim.disk_reserve_mb * mb:
            return _Over(f"the free space kept on the workspaces' disk ({lim.disk_reserve_mb} MB)", before)
        return None

    def _watch_disk(self, proc: subprocess.Popen, before: int, finished: threading.Event, over: list[_Over]) -> None:
        """Measure the workspace while the command runs; kill it at the first budget it passes. A look costs a walk
        of the tree, so the next waits five times as long as the last took: a big repository costs the worker at
        most a sixth of a core while a command runs, and is looked at less often (the look after the command still
        holds the budget)."""
        pause = WATCH_MIN_S
        while not finished.wait(pause):
            t0 = time.monotonic()
            past = self._over_budget(self.disk_used(), before)
            if past:
                over.append(past)
                self._kill(proc)
                return
            pause = max(WATCH_MIN_S, 5 * (time.monotonic() - t0))

    def _cut(self, started_at: float, past: _Over) -> None:
        """Bring a workspace that passed a budget back under it: the files this command changed go first, largest
        first (by ctime, which the agent cannot set back), then the largest others, until it is back under."""
        files = _tree_files(self.workspace)
        fresh = sorted((f for f in files if f[2] >= started_at - 1), key=lambda f: -f[1])
        old = sorted((f for f in files if f[2] < started_at - 1), key=lambda f: -f[1])
        removed = 0
        used = self.disk_used()
        for path, _size, _ctime in fresh + old:
            if used <= past.back_to:
                break
            try:
                path.unlink()
            except OSError:
                continue
            removed += 1
            used = self.disk_used()
        log.warning("sandbox.disk_budget", workspace=self.workspace.name, why=past.why, removed=removed, bytes=used)

    def _argv(self, cmd: list[str], ro: dict[Path, str], rw: dict[Path, str]) -> list[str]:
        if self.pool.mode == "unsandboxed":
            return cmd
        return _bwrap_argv(
            self.pool.bwrap, self.workspace, cmd, ro, rw, tmp_bytes=self.limits.workspace_disk_mb * 1024 * 1024
        )

    def _env(self) -> dict[str, str]:
        home = INSIDE_WORKSPACE if self.pool.mode == "bwrap" else str(self.workspace)
        return {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": home,
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "PYTHONDONTWRITEBYTECODE": "1",
        }

    def _limited(self, argv: list[str]) -> list[str]:
        """`argv` under the sandbox's resource limits, set by `prlimit` (util-linux) after the switch to the
        sandbox's uid and before bwrap. Not in a `preexec_fn`: Python code between fork and exec in this threaded
        worker can deadlock on a lock another thread held at the fork (seen: a forked child stuck on a futex, the
        activity's thread blocked in Popen forever, the env pool hung)."""
        lim = self.limits
        mb = 1024 * 1024
        limits = [
            f"--as={lim.memory_mb * mb}",
            f"--cpu={lim.cpu_s}:{lim.cpu_s + 1}",
            f"--fsize={lim.file_size_mb * mb}",
            "--core=0",
        ]
        if self.uid is not None:
            limits.append(f"--nproc={lim.processes}")
        return [PRLIMIT, *limits, "--", *argv]

    def _kill(self, proc: subprocess.Popen) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if self.uid is not None:
            _kill_uid(self.uid)

    def _own(self, path: Path) -> None:
        if self.uid is None:
            return
        os.chown(path, self.uid, self.uid, follow_symlinks=False)
        if path.is_dir() and not path.is_symlink():
            for p in path.rglob("*"):
                os.chown(p, self.uid, self.uid, follow_symlinks=False)


class SandboxPool:
    """A worker's sandboxes: leases a uid per sandbox and keeps workspaces under `root`."""

    def __init__(
        self, root: Path, limits: SandboxLimits | None = None, mode: Literal["bwrap", "unsandboxed"] = "bwrap"
    ):
        self.root = Path(root)
        self.limits = limits or SandboxLimits()
        self.mode = mode
        self.bwrap = shutil.which("bwrap") or ""
        self._use: dict[Path, int] = {}  # each open workspace's bytes at its last measurement
        self._use_lock = threading.Lock()
        if mode == "bwrap":
            if os.geteuid() != 0:
                raise SandboxUnavailable("the env pool must run as root to give each sandbox a uid of its own")
            # bwrap's namespace init outlives the bwrap we wait for; as a subreaper this process reaps it
            # (reap_orphans), so no zombie holds a slot of the sandbox uid's process limit.
            become_subreaper()
            why = sandbox_problem()
            reap_orphans()
            if why:
                raise SandboxUnavailable(why)
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o711)  # the sandbox uids must traverse it to reach their workspace, never list it
        UID_LOCKS.mkdir(mode=0o700, exist_ok=True)
        if mode == "bwrap":
            why = workspace_problem(self.root)
            reap_orphans()
            if why:
                raise SandboxUnavailable(why)

    def open(self, name: str) -> Sandbox:
        """A fresh, empty workspace for one episode."""
        uid, fd = self._lease_uid() if self.mode == "bwrap" else (None, None)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:80]
        workspace = Path(tempfile.mkdtemp(prefix=f"{safe}-", dir=self.root))
        if uid is not None:
            os.chown(workspace, uid, uid)
        os.chmod(workspace, 0o700)
        return Sandbox(self, workspace, uid, fd)

    def _record_use(self, workspace: Path, used: int | None) -> None:
        with self._use_lock:
            if used is None:
                self._use.pop(workspace, None)
            else:
                self._use[workspace] = used

    def _others_use(self, workspace: Path) -> int:
        with self._use_lock:
            return sum(v for k, v in self._use.items() if k != workspace)

    @contextmanager
    def session(self, name: str) -> Iterator[Sandbox]:
        box = self.open(name)
        try:
            yield box
        finally:
            box.close()

    def _lease_uid(self) -> tuple[int, int]:
        """The first uid no live sandbox on this machine holds; the lock dies with the process that held it."""
        for slot in range(UID_SLOTS - 1):  # the last uid is the probe's
            uid = UID_BASE + slot
            fd = os.open(UID_LOCKS / f"{uid}.lock", os.O_CREAT | os.O_RDWR, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            _kill_uid(uid)  # whatever a crashed worker left running under it
            return uid, fd
        raise SandboxUnavailable(f"all {UID_SLOTS - 1} sandbox uids are in use")


def _bwrap_argv(
    bwrap: str,
    workspace: Path,
    cmd: list[str],
    ro: dict[Path, str],
    rw: dict[Path, str],
    tmp_bytes: int | None = None,
) -> list[str]:
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--hostname", "sandbox"]
    argv += _system_binds(tmp_bytes)
    argv += ["--bind", str(workspace), INSIDE_WORKSPACE, "--chdir", INSIDE_WORKSPACE]
    for host, inside in ro.items():
        argv += ["--ro-bind", str(host), inside]
    for host, inside in rw.items():
        argv += ["--bind", str(host), inside]
    return argv + ["--", *cmd]


def _reach_fix(root: Path) -> str:
    """The folder that keeps the sandbox uids out of `root` (when its mode says so), and the fix."""
    root = Path(root)
    blocked = next((p for p in [*reversed(root.parents), root] if _closed_to_others(p)), None)
    why = (
        f"{blocked} (mode {blocked.stat().st_mode & 0o7777:04o}, owner uid {blocked.stat().st_uid}) does not let other"
        f" users through, and each sandbox runs as a uid of its own ({UID_BASE} and up). "
        if blocked is not None
        else f"Every sandbox runs as a uid of its own ({UID_BASE} and up) and must traverse each parent of {root}. "
    )
    fix = f"`chmod o+x {blocked}`" if blocked is not None else "give every parent the x bit for others"
    return (
        f"{why}Fix: set envs.sandbox.root ({ROOT_ENV}) to a folder every user may traverse, such as the default"
        f" /tmp/openclaw-rl-sandboxes, or {fix}."
    )


def _closed_to_others(path: Path) -> bool:
    try:
        return not path.stat().st_mode & 0o001
    except OSError:
        return True


def _system_binds(tmp_bytes: int | None = None) -> list[str]:
    binds = ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
    for link in ("bin", "lib", "lib64", "sbin"):
        p = Path("/") / link
        if p.is_symlink():
            binds += ["--symlink", os.readlink(p), f"/{link}"]
        elif p.is_dir():
            binds += ["--ro-bind", str(p), f"/{link}"]
    size = ["--size", str(tmp_bytes)] if tmp_bytes else []  # /tmp is memory: capped like the workspace
    return binds + ["--proc", "/proc", "--dev", "/dev", *size, "--tmpfs", "/tmp"]


def _as_uid(uid: int) -> dict:
    """Popen arguments that run the child as `uid` with no supplementary groups: switched in C between fork and
    exec, never by Python code there (see `Sandbox._limited`)."""
    return {"user": uid, "group": uid, "extra_groups": []}


def _kill_uid(uid: int) -> None:
    """SIGKILL every process whose real uid is `uid` (a sandbox's own uid: nothing else runs under it)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid == uid:
                os.kill(int(entry.name), signal.SIGKILL)
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue


def _read_clipped(path: Path, keep: int) -> tuple[str, bool]:
    size = path.stat().st_size
    with open(path, "rb") as f:
        if size <= keep * 2:
            return f.read().decode("utf-8", errors="replace")[: keep * 2], False
        head = f.read(keep).decode("utf-8", errors="replace")
        f.seek(size - keep)
        tail = f.read().decode("utf-8", errors="replace")
    half = keep // 2
    return f"{head[:half]}\n[... {size - 2 * half} bytes elided ...]\n{tail[-half:]}", True


def _limit_from(code: int, stderr: str) -> str | None:
    low = stderr.lower()
    if "memoryerror" in low or "cannot allocate memory" in low or "bad_alloc" in low or "out of memory" in low:
        return "memory"
    if "resource temporarily unavailable" in low and "fork" in low:
        return "processes"
    return _SIG_EXIT.get(code)


def _walk(root: Path) -> Iterator[os.DirEntry]:
    """Every entry under `root`, never following a symlink, without recursion (an agent can nest folders deeper than
    Python's stack); entries that vanish while the command runs are skipped."""
    stack = [str(root)]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    yield entry
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                    except OSError:
                        continue
        except OSError:
            continue


def _tree_bytes(root: Path) -> int:
    """Disk a tree takes: allocated blocks (a sparse file costs what it holds), a hard-linked inode once."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for entry in _walk(root):
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        total += st.st_blocks * 512
    return total


def _tree_files(root: Path) -> list[tuple[Path, int, float]]:
    """The tree's files (not folders) as (path, bytes on disk, ctime)."""
    files = []
    for entry in _walk(root):
        try:
            if entry.is_dir(follow_symlinks=False):
                continue
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        files.append((Path(entry.path), st.st_blocks * 512, st.st_ctime))
    return files


def _free_bytes(path: Path) -> int:
    try:
        st = os.statvfs(path)
    except OSError:
        return 1 << 62  # the workspace is gone: nothing of it to guard
    return st.f_bavail * st.f_frsize
