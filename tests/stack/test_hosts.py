"""Several hosts on one machine (stack.hosts): the deployment in 8 network namespaces, no path shared, services
found by address alone; a few chat turns and a task group train versions that reach both engines over the network
(bench/hosts.py drives it, as `openclaw-rl bench hosts` does with more load)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.hosts import HostsBench, Load
from stack.hosts import Deployment, Knobs, hosts_problem

pytestmark = pytest.mark.skipif(hosts_problem() is not None, reason=f"no hosts here: {hosts_problem()}")


def test_hosts_train_and_serve_on_both_engines(hosts_root: Path):
    from engine.tiny_qwen3 import ensure_tiny_model

    model = ensure_tiny_model(hosts_root / "image" / "tiny-qwen3")
    deployment = Deployment(hosts_root, Knobs(batch_size=4, wait_s=1.0))
    load = Load(sessions=3, turns_per_session=3, groups=1, samples=2, max_steps=2, versions=1, timeout_s=600)

    async def scenario():
        try:
            await deployment.start(model)
            # No path shared: distinct data folders, a private /tmp per host, the other hosts' folders hidden.
            dirs = {h.data_dir.resolve() for h in deployment.hosts.values()}
            assert len(dirs) == len(deployment.hosts)
            env1, env2 = deployment.hosts["env-1"], deployment.hosts["env-2"]
            wrote = env1.run(["sh", "-c", "echo secret > /tmp/only-here && cat /tmp/only-here"])
            assert wrote.returncode == 0 and wrote.stdout.strip() == "secret", wrote.stderr
            assert env2.run(["test", "-e", "/tmp/only-here"]).returncode != 0
            assert not Path("/tmp/only-here").exists()
            assert env2.run(["ls", str(env1.data_dir / "logs")]).stdout.strip() == ""
            # A bubblewrap sandbox still starts inside an env host.
            probe = env1.run([*_python(), "-c", "from envs.sandbox import sandbox_problem; print(sandbox_problem())"])
            assert probe.stdout.strip().endswith("None"), probe.stdout + probe.stderr
            bench = HostsBench(deployment, load)
            figures = await bench.run()
            return figures
        finally:
            await deployment.close()

    fig = asyncio.run(scenario())
    print(fig.last_line())
    assert fig.turns == 9 and fig.status_5xx == 0 and not fig.chat_errors
    assert fig.env_steps > 0 and fig.groups == 1
    assert fig.versions >= 1 and len(set(fig.engine_versions.values())) == 1 and len(fig.engine_versions) == 2
    assert fig.published > 0 and fig.lost == 0 and fig.duplicated == 0
    # Everything is gone: no namespace or bridge of this run is left.
    import subprocess

    assert deployment.net.tag not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert deployment.net.bridge not in subprocess.run(["ip", "link"], capture_output=True, text=True).stdout


def _python() -> list[str]:
    import sys

    return [sys.executable]
