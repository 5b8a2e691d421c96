"""What a hostile or careless agent command meets: each attack is stopped or refused, reported, and the next works."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from envs.base import Action, ToolCallAction
from envs.sandbox import SandboxLimits, SandboxPool, sandbox_problem
from envs.terminal.source import TerminalTasks
from openclaw_rl.settings import Settings
from stack.launcher import sandbox_refusal

pytestmark = pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}")


@pytest.fixture(scope="module")
def pool() -> SandboxPool:
    # Under /tmp: the sandbox uids must traverse the root's parents (pytest's own tmp folders are 0700).
    return SandboxPool(
        Path(f"/tmp/oc-sandbox-test-{uuid.uuid4().hex[:8]}"), SandboxLimits(wall_s=4, memory_mb=1024, processes=64)
    )


@pytest.fixture
def box(pool):
    with pool.session("attack") as b:
        yield b


def still_serves(box) -> None:
    r = box.run("echo alive")
    assert r.exit_code == 0 and r.stdout.strip() == "alive"


def test_a_fork_bomb_hits_the_process_limit(box):
    r = box.run("bomb() { bomb | bomb & }; bomb; sleep 1; echo survived")
    assert r.limit == "processes" and "[sandbox: stopped by the processes limit]" in r.report()
    still_serves(box)


def test_an_infinite_loop_is_killed_at_the_wall_clock(box):
    started = time.monotonic()
    r = box.run("while true; do :; done")
    assert r.limit == "wall_clock" and r.exit_code == 124 and time.monotonic() - started < 10
    still_serves(box)


def test_a_10_gb_allocation_fails_inside(box):
    r = box.run("python3 -c 'x = bytearray(10 * 1024**3)'")
    assert r.exit_code != 0 and r.limit == "memory" and "MemoryError" in r.stderr
    still_serves(box)


def test_there_is_no_network(box):
    r = box.run("python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 80), timeout=2)'")
    assert r.exit_code != 0 and "Network is unreachable" in r.stderr
    r = box.run("python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 22), timeout=2)'")
    assert r.exit_code != 0  # not even the host's loopback: the sandbox has its own, empty network namespace
    still_serves(box)


def test_writes_outside_the_workspace_are_refused(box):
    r = box.run("echo x > /usr/evil; echo y > /etc/evil; touch /app/ok && echo wrote-app")
    assert "Read-only file system" in r.stderr and "wrote-app" in r.stdout
    assert not Path("/usr/evil").exists() and not Path("/etc/evil").exists()
    with pytest.raises(ValueError):
        box.write_file("../escape.txt", "no")
    still_serves(box)


def test_another_episodes_workspace_cannot_be_read(pool, box):
    with pool.session("victim") as other:
        other.write_file("secret.txt", "hunter2")
        assert other.uid != box.uid
        r = box.run(f"cat {other.workspace}/secret.txt; ls {other.workspace.parent}; cat ../secret.txt")
        assert "hunter2" not in r.stdout
        assert other.run("cat secret.txt").stdout == "hunter2"  # its owner still reads it


def test_huge_output_is_clipped_and_a_huge_file_is_stopped(box):
    r = box.run("yes | head -c 5000000")
    assert r.truncated and len(r.stdout) < 40_000 and "elided" in r.stdout
    r = box.run("head -c 2000000000 /dev/zero > big.bin")
    assert r.limit == "file_size"
    still_serves(box)


def test_background_processes_die_with_the_command(box):
    box.run("(sleep 30; echo late > late.txt) &")
    time.sleep(0.5)
    assert box.run("ps -e -o comm= | grep -c sleep || true").stdout.strip() == "0"


def test_the_terminal_env_reports_the_limit_in_its_observation_and_keeps_serving(pool):
    env = TerminalTasks().make("text-top-ips", pool)
    env.reset()
    try:
        obs = env.step(
            Action(
                tool_calls=[
                    ToolCallAction(
                        id="c1", name="bash", arguments={"command": "bomb() { bomb | bomb & }; bomb; sleep 1"}
                    )
                ]
            )
        )
        # which limit a fork bomb meets first depends on the machine's load: the processes cap, or the memory cap
        # (seen with the other worker's stacks beside it), and either must be named, with the env serving on
        content = obs.tool_results[0].content
        assert ("processes limit" in content or "stopped by the memory limit" in content) and not obs.done
        obs = env.step(Action(tool_calls=[ToolCallAction(id="c2", name="bash", arguments={"command": "echo next"})]))
        assert "next" in obs.tool_results[0].content and obs.tool_results[0].exit_code == 0
    finally:
        env.close()


def test_closing_removes_the_workspace_and_every_process(pool):
    box = pool.open("closing")
    box.run("(sleep 30 &) ; true")
    workspace = box.workspace
    box.close()
    assert not workspace.exists()


def test_up_refuses_without_a_sandbox_unless_told(monkeypatch):
    import envs.sandbox as sandbox

    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    why = sandbox_refusal(Settings())
    assert why and "bubblewrap" in why and "OPENCLAW_RL_ENVS__SANDBOX__MODE=unsandboxed" in why
    assert sandbox_refusal(Settings(envs={"sandbox": {"mode": "unsandboxed"}})) is None


def test_commands_start_without_python_code_between_fork_and_exec(box, monkeypatch):
    """A `preexec_fn` runs Python in the forked child of a threaded worker; a lock held by another thread at the
    fork (logging, the allocator) is never released there, and the child hung on a futex with the activity's
    thread blocked in Popen (seen in the agents benchmark). The uid switch and the limits happen in C and prlimit."""
    import subprocess

    seen: list[dict] = []
    real = subprocess.Popen

    def recording(*args, **kwargs):
        seen.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", recording)
    res = box.run("ulimit -v; ulimit -u; id -u")
    assert seen and all(kw.get("preexec_fn") is None for kw in seen)
    memory_kb, processes, uid = res.stdout.split()
    assert int(memory_kb) == box.limits.memory_mb * 1024 and int(processes) == box.limits.processes
    assert int(uid) == box.uid


def test_commands_from_many_threads_while_others_log_all_finish(box, pool):
    import threading

    import structlog

    log = structlog.get_logger("stress")
    stop = threading.Event()

    def chatter() -> None:
        while not stop.is_set():
            log.info("busy", payload="x" * 200)

    boxes = [pool.open(f"stress-{uuid.uuid4().hex[:6]}") for _ in range(4)]
    results: list[int] = []
    noise = [threading.Thread(target=chatter, daemon=True) for _ in range(2)]

    def commands(b) -> None:
        for _ in range(10):
            results.append(b.run("echo ok").exit_code)

    workers = [threading.Thread(target=commands, args=(b,), daemon=True) for b in boxes]
    try:
        for t in noise + workers:
            t.start()
        for t in workers:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in workers), "a command never started"
        assert results == [0] * 40
    finally:
        stop.set()
        for b in boxes:
            b.close()


@pytest.mark.parametrize("mode", ["bwrap", "unsandboxed"])
def test_files_each_under_the_file_limit_but_together_over_the_disk_budget_fail_and_are_cut(mode):
    """One `exec` of a second wrote 1.25 GB as five files each under the file size limit (issue 42, item 10)."""
    limits = SandboxLimits(wall_s=20, memory_mb=1024, processes=64, file_size_mb=40, workspace_disk_mb=100)
    pool = SandboxPool(Path(f"/tmp/oc-sandbox-disk-{uuid.uuid4().hex[:8]}"), limits, mode=mode)
    with pool.session("disk") as box:
        box.write_file("task.txt", "the task's own file stays")
        r = box.run("for i in 1 2 3 4 5 6 7 8; do head -c 35000000 /dev/zero > part$i.bin || exit 3; done; echo done")
        assert r.exit_code != 0 and r.limit == "disk", r
        assert "disk budget of 100 MB" in r.report() and "done" not in r.stdout
        assert box.disk_used() <= 100 * 1024 * 1024
        assert box.read_file("task.txt") == "the task's own file stays"
        # A writer too fast for the watchdog's look is caught by the measurement after the command.
        r = box.run("head -c 35000000 /dev/zero > a.bin; head -c 35000000 /dev/zero > b.bin; echo more")
        assert r.limit == "disk" and box.disk_used() <= 100 * 1024 * 1024
        still_serves(box)
        assert box.run("echo small > small.txt && cat small.txt").stdout.strip() == "small"
        # Files written from the host count too: refused before they are written.
        with pytest.raises(ValueError, match="disk budget of 100 MB"):
            for i in range(4):
                box.write_file(f"host{i}.bin", b"x" * (39 * 1024 * 1024))
        assert box.disk_used() <= 100 * 1024 * 1024


@pytest.mark.parametrize("mode", ["bwrap", "unsandboxed"])
def test_the_workspaces_of_one_env_worker_together_have_a_budget(mode):
    limits = SandboxLimits(wall_s=20, memory_mb=1024, processes=64, file_size_mb=40, workspace_disk_mb=100, disk_mb=120)
    pool = SandboxPool(Path(f"/tmp/oc-sandbox-disk-{uuid.uuid4().hex[:8]}"), limits, mode=mode)
    with pool.session("first") as first, pool.session("second") as second:
        assert first.run("head -c 35000000 /dev/zero > a.bin; head -c 35000000 /dev/zero > b.bin").limit is None
        r = second.run("head -c 35000000 /dev/zero > a.bin; head -c 35000000 /dev/zero > b.bin; echo done")
        assert r.limit == "disk" and "all workspaces on this env worker (120 MB)" in r.report()
        assert first.disk_used() + second.disk_used() <= 120 * 1024 * 1024
        still_serves(second)


def test_the_private_tmp_is_capped_at_the_workspace_budget():
    limits = SandboxLimits(wall_s=20, memory_mb=1024, processes=64, file_size_mb=40, workspace_disk_mb=50)
    pool = SandboxPool(Path(f"/tmp/oc-sandbox-disk-{uuid.uuid4().hex[:8]}"), limits)
    with pool.session("tmp") as box:
        r = box.run("for i in 1 2 3; do head -c 30000000 /dev/zero > /tmp/t$i.bin; done; du -sm /tmp")
        assert "No space left on device" in r.stderr and int(r.stdout.split()[0]) <= 50
