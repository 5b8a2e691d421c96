"""The hosts' services run from the deployment's images (deploy/docker/), not from the checkout.

`openclaw-rl bench hosts --images` (stack.hosts `Knobs.images`): on each host the API and every worker pool run as a
container of its role's image, joined to the host's network namespace, with the host's data directory mounted at the
same path and the host's settings as its environment, running the image's own command (its CMD: nothing is
overridden). So the images are proven by what proves the hosts: the same settings, the same load, the same accounts.
What stays a process of the host is what the deployment takes from other projects' images: Temporal, valkey, the
sglang-router and the policy servers (the embedded engine stands in for SGLang's image here).

Images come from deploy/build-images.sh (`--offline-base` on a machine with no image registry). docker or podman;
podman on a cgroup-v1 host needs runc (the script's note).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

from openclaw_rl.settings import Pool
from stack.process import ServiceSpec

REPO = Path(__file__).resolve().parents[1]
IMAGE_UID = 10001
"""The user every image but the env pool's runs as (deploy/docker/*: `USER 10001`); it owns its host's folder."""
ROLE_OF_POOL = {
    Pool.WORKFLOW: "worker-workflow",
    Pool.JUDGE: "worker-judge",
    Pool.POLICY: "worker-policy",
    Pool.ENV: "worker-env",
    Pool.TRAINER: "trainer",
}
PRIVILEGED_ROLES = {"worker-env"}
"""Roles whose container makes namespaces (bubblewrap sandboxes): privileged, as deploy/k8s runs the env pool."""
PASSED_ENV = ("OPENCLAW_RL_", "TEMPORAL_", "REDIS_URL", "GLOO_", "OTEL_", "OMP_NUM_THREADS", "HOME", "PYTHONUNBUFFERED")
"""What of a host's environment reaches its containers: the settings, never the checkout's paths (PYTHONPATH, PATH,
the virtualenv), which would run the checkout instead of the image."""
HOST_ONLY = {"OPENCLAW_RL_HOST_CWD"}
"""The harness's own: where a host's processes start in the checkout."""


def project_version() -> str:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def role_of(service: str) -> str:
    """The image role of a host service's name (`api`, `worker-<pool>`)."""
    return "api" if service == "api" else ROLE_OF_POOL[Pool(service.removeprefix("worker-"))]


@dataclass(frozen=True)
class HostImages:
    tool: str = "podman"
    """podman, the only tool `problem()` accepts: a container joins a named network namespace (`--network
    ns:<path>`) and replaces a leftover of its name (`--replace`), which docker cannot."""
    version: str = ""
    repository: str = "openclaw-rl"
    runtime: str | None = "runc"
    """podman's OCI runtime (crun refuses cgroup v1/hybrid hosts); ignored for docker."""

    def __post_init__(self) -> None:
        if not self.version:
            object.__setattr__(self, "version", project_version())

    def image(self, role: str) -> str:
        return f"{self.repository}/{role}:{self.version}"

    def problem(self) -> str | None:
        """Why the images cannot run here (no tool, an image not built), or None."""
        if self.tool != "podman":
            return f"{self.tool}: the hosts' containers join named network namespaces, which needs podman"
        if shutil.which(self.tool) is None:
            return f"{self.tool} is not installed (apt-get install podman runc)"
        missing = [
            self.image(r) for r in ("api", *ROLE_OF_POOL.values()) if subprocess.run(
                [self.tool, "image", "inspect", self.image(r)], capture_output=True
            ).returncode != 0
        ]  # fmt: skip
        if missing:
            return f"not built: {', '.join(missing)} (deploy/build-images.sh, --offline-base without a registry)"
        return None

    def _tool(self) -> list[str]:
        return [self.tool, "--runtime", self.runtime] if self.tool == "podman" and self.runtime else [self.tool]

    def container_name(self, ns: str, service: str) -> str:
        return f"{ns}-{service}"

    def spec(self, ns: str, data_dir: Path, host_env: dict[str, str], spec: ServiceSpec) -> ServiceSpec:
        """`spec` (a host's API or worker service) as a container of its role's image in namespace `ns`: the same
        name and readiness, the image's own command. Its settings go in through a file in the host's folder (mode
        600), not the command line."""
        role = role_of(spec.name)
        env = {k: v for k, v in (host_env | spec.env).items() if k.startswith(PASSED_ENV) and k not in HOST_ONLY}
        env_file = data_dir / "containers" / f"{spec.name}.env"
        env_file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(
            env_file, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600
        )  # never readable by others, not for a moment
        with os.fdopen(fd, "w") as f:
            f.write("".join(f"{k}={v}\n" for k, v in sorted(env.items())))
        os.chmod(env_file, 0o600)  # a file left by an earlier run keeps its mode through O_TRUNC
        limits = []
        if self.tool == "podman":  # its defaults sit above what a host without CAP_SYS_RESOURCE may set
            hard = subprocess.run(["sh", "-c", "ulimit -Hn"], capture_output=True, text=True).stdout.strip()
            limits = ["--ulimit", f"nofile={hard}:{hard}", "--ulimit", "nproc=4096:4096"]
        argv = [
            *self._tool(), "run", "--rm", "--replace", "--name", self.container_name(ns, spec.name),
            "--network", f"ns:/run/netns/{ns}", "--shm-size", "1g", *limits,
            "--volume", f"{data_dir}:{data_dir}", "--env-file", str(env_file),
            *(["--privileged"] if role in PRIVILEGED_ROLES else []),
            self.image(role),
        ]  # fmt: skip
        path = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")}
        return dataclasses.replace(spec, argv=argv, env=path, inherit_env=False, stop_timeout_s=20.0, cwd=None)

    def own(self, data_dir: Path) -> None:
        """The host's folder belongs to the images' user (the env pool's image runs as root: no matter)."""
        for path in [data_dir, *data_dir.rglob("*")]:
            os.lchown(path, IMAGE_UID, IMAGE_UID)

    def stop(self, ns: str, services: list[str], timeout_s: float) -> None:
        """SIGTERM into the host's containers, SIGKILL after `timeout_s`, and remove them: `run` forwards no signal
        once it is killed, and a container outlives it."""
        names = [self.container_name(ns, s) for s in services]
        if names:
            t = str(int(timeout_s))
            subprocess.run([*self._tool(), "stop", "--time", t, *names], capture_output=True, timeout=timeout_s + 60)
            subprocess.run([*self._tool(), "rm", "--force", *names], capture_output=True, timeout=60)

    def kill(self, ns: str, services: list[str]) -> None:
        """SIGKILL to the host's containers: killing `run` leaves its container running under the engine."""
        names = [self.container_name(ns, s) for s in services]
        if names:
            subprocess.run([*self._tool(), "kill", "--signal", "KILL", *names], capture_output=True, timeout=60)

    def pids(self, ns: str, services: list[str]) -> list[int]:
        """The main process of each of the host's running containers (on this machine's pid namespace)."""
        pids = []
        for name in (self.container_name(ns, s) for s in services):
            out = subprocess.run(
                [*self._tool(), "inspect", "--format", "{{.State.Pid}}", name], capture_output=True, text=True
            )
            if out.returncode == 0 and out.stdout.strip().isdigit() and int(out.stdout) > 0:
                pids.append(int(out.stdout))
        return pids
