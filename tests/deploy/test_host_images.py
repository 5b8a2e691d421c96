"""How a host's service becomes a container of its role's image (stack.host_images): the image's own command, the
host's settings and nothing of the checkout, its folder mounted where the settings say. The images themselves are
built and run by deploy/build-images.sh and `openclaw-rl bench hosts --images` (docs/deployment.md), not here:
building them takes a registry or a Debian mirror and about 15 minutes."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

from openclaw_rl.settings import Pool, Settings
from stack.host_images import HostImages, project_version, role_of
from stack.services import api_service, worker_service

REPO = Path(__file__).resolve().parents[2]


def test_each_service_maps_to_the_image_whose_command_runs_it():
    for pool in Pool:
        role = role_of(f"worker-{pool.value}")
        (cmd,) = re.findall(r"^CMD (\[.*\])$", (REPO / "deploy" / "docker" / f"Dockerfile.{role}").read_text(), re.M)
        assert json.loads(cmd) == ["openclaw-rl", "worker", "--pool", pool.value]
    (cmd,) = re.findall(r"^CMD (\[.*\])$", (REPO / "deploy" / "docker" / "Dockerfile.api").read_text(), re.M)
    assert role_of("api") == "api" and json.loads(cmd) == ["openclaw-rl", "api"]


def test_a_container_runs_the_images_command_with_the_hosts_settings_alone(tmp_path):
    tool = "podman"
    images = HostImages(version="9.9.9")
    host_env = {
        "OPENCLAW_RL_REDIS__URL": "redis://10.0.0.1:6379/0",
        "OPENCLAW_RL_REDIS__PASSWORD": "s3cret",
        "OPENCLAW_RL_POLICY__SERVER_URLS": '["http://10.0.0.5:30000"]',
        "OPENCLAW_RL_DATA_DIR": str(tmp_path),
        "TEMPORAL_ADDRESS": "10.0.0.1:7233",
        "HOME": str(tmp_path / "home"),
        "PYTHONPATH": "/work/checkout",
        "OPENCLAW_RL_HOST_CWD": "/work/checkout",
        "PATH": "/work/checkout/.venv/bin:/usr/bin",
    }
    spec = images.spec("ocx-env-1", tmp_path, host_env, worker_service(Pool.ENV))
    argv = spec.argv
    assert argv[-1] == "openclaw-rl/worker-env:9.9.9"  # nothing after the image: its own CMD runs
    assert argv[:3] == [tool, "--runtime", "runc"]
    assert argv[argv.index("--network") + 1] == "ns:/run/netns/ocx-env-1"
    assert argv[argv.index("--volume") + 1] == f"{tmp_path}:{tmp_path}"  # the folder where the settings name it
    assert "--privileged" in argv  # bubblewrap sandboxes inside
    assert "s3cret" not in " ".join(argv)  # settings through a file, not the command line (logged at start)
    env_file = Path(argv[argv.index("--env-file") + 1])
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600 and env_file.is_relative_to(tmp_path)
    lines = dict(line.split("=", 1) for line in env_file.read_text().splitlines())
    assert lines["OPENCLAW_RL_REDIS__PASSWORD"] == "s3cret" and lines["TEMPORAL_ADDRESS"] == "10.0.0.1:7233"
    assert lines["OPENCLAW_RL_POLICY__SERVER_URLS"] == '["http://10.0.0.5:30000"]'
    assert not {"PYTHONPATH", "OPENCLAW_RL_HOST_CWD", "PATH"} & set(lines)  # the image's code, not the checkout's
    assert spec.name == "worker-env" and spec.inherit_env is False and set(spec.env) == {"PATH"}

    api = images.spec("ocx-api", tmp_path, host_env, api_service(Settings()))
    assert api.argv[-1] == "openclaw-rl/api:9.9.9" and "--privileged" not in api.argv
    assert api.ready is not None


def test_the_version_is_the_projects_and_docker_is_refused_with_a_reason():
    assert HostImages().image("api") == f"openclaw-rl/api:{project_version()}"
    assert "needs podman" in HostImages(tool="docker").problem()
