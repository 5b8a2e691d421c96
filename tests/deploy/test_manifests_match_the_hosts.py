"""The Kubernetes manifests deploy what the several-hosts harness proves (stack/hosts.py, `bench hosts`): each image
runs the command the harness runs for its role, and every setting the harness gives its hosts is set in the manifests
too (the same value where the design depends on it), or is on a short list of what the harness sets only because it
runs on one CPU box, each with its reason. A setting added to the harness and not to the manifests fails here."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from openclaw_rl.encryption import Keyring
from openclaw_rl.settings import Pool, Settings
from stack import hosts
from stack.hosts import Deployment, Knobs, _environ
from stack.services import PYTHON_CLI, api_service, worker_service
from tests.helpers import REPO

K8S = REPO / "deploy" / "k8s"

HARNESS_ONLY = {
    "temporal.headless": "the harness runs Temporal's dev server without its UI; a cluster runs Temporal itself",
    "temporal.bind_host": "the harness starts Temporal on the control host; a cluster has its own frontend Service",
    "redis.bind_host": "the harness starts valkey on the control host; the manifests name an existing Redis",
    "api": "the API host's address and port; the Kubernetes Service fronts the pod",
    "engine": "the policy hosts run the embedded engine in place of the SGLang servers (20-sglang-policy.yaml)",
    "policy.context_length": "the tiny model's 4096 tokens; an SGLang server reports its own",
    "training.adapters": "the benchmark's choice; the manifests leave the default (shared)",
    "training.batch_size": "the benchmark's pace on a CPU",
    "training.wait_s": "the benchmark's pace on a CPU",
    "training.checkpoint": "the benchmark writes a durable checkpoint at every version to test the trainer's loss",
    "training.weight_sync.backend": "gloo between CPU hosts; on GPUs `auto` picks nccl",
    "data_dir": "each host's own folder; each pod mounts its own volume at OPENCLAW_RL_DATA_DIR",
}
"""Settings the harness sets that the manifests need not, by dotted path (a prefix covers what is under it)."""

SAME_VALUE = {
    "training.weight_sync.mode": "distributed",  # weights reach the servers over the network, never by a path
    "training.weight_sync.disk_fallback": False,  # no disk is shared: a failed broadcast is retried, not sent by path
    "policy.incremental_streaming": True,  # the servers stream only what is new (the router forwards no header)
}


def configured(model: BaseModel, prefix: str = "") -> set[str]:
    """The dotted paths of every field given a value (by the environment), not left at its default."""
    out: set[str] = set()
    for name in model.model_fields_set:
        value, path = getattr(model, name), f"{prefix}{name}"
        nested = configured(value, f"{path}.") if isinstance(value, BaseModel) else set()
        out |= nested or {path}
    return out


def value_at(settings: Settings, path: str) -> object:
    value: object = settings
    for part in path.split("."):
        value = getattr(value, part)
    return value


@pytest.fixture(scope="module")
def harness() -> dict[str, Settings]:
    """Each host's settings as its processes read them (no network is made: only the layout's environment)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(hosts, "_free_subnet", lambda: "10.231.1")
        deployment = Deployment(Path("/var/tmp/openclaw-rl-layout-only"), Knobs())
    out = {}
    for host in deployment.hosts.values():
        with _environ(deployment.host_env(host)):
            out[host.name] = Settings()
    return out


@pytest.fixture(scope="module")
def manifests() -> Settings:
    """What every pool's pod reads: the ConfigMap and the Secret (each pool's Deployment takes both by envFrom)."""
    config = yaml.safe_load((K8S / "01-config.yaml").read_text())["data"]
    secret = yaml.safe_load((K8S / "02-secrets.example.yaml").read_text())["stringData"]
    for manifest in K8S.glob("1[0-4]-*.yaml"):
        refs = [
            ref
            for doc in yaml.safe_load_all(manifest.read_text())
            if doc and doc["kind"] == "Deployment"
            for c in doc["spec"]["template"]["spec"]["containers"]
            for ref in c.get("envFrom", [])
        ]
        names = {(r.get("configMapRef") or r.get("secretRef"))["name"] for r in refs}
        assert {"openclaw-rl-config", "openclaw-rl-secrets"} <= names, manifest.name
    # The operator's part: the Secret's encryption-key placeholder (which no pod starts with) becomes a real key.
    assert secret["OPENCLAW_RL_ENCRYPTION_KEYS"] == "change-me"
    secret["OPENCLAW_RL_ENCRYPTION_KEYS"] = f"k1:{Keyring.new_key()}"
    with _environ({**config, **secret}):
        return Settings()


def _harness_only(path: str) -> bool:
    return any(path == p or path.startswith(f"{p}.") for p in HARNESS_ONLY)


def test_every_setting_the_hosts_run_with_is_set_by_the_manifests_or_said_why_not(harness, manifests):
    in_manifests = configured(manifests)
    missing = set()
    for name, settings in harness.items():
        for path in configured(settings) - in_manifests:
            if _harness_only(path):
                continue
            if path == "redis.password" and "@" in (manifests.redis.url or ""):  # given inside REDIS_URL there
                continue
            missing.add((name, path))
    assert not missing, f"set on the hosts, not in deploy/k8s (set it there, or add it to HARNESS_ONLY): {missing}"


@pytest.mark.parametrize("path", sorted(SAME_VALUE))
def test_what_the_design_depends_on_has_the_same_value_on_the_hosts_and_in_the_manifests(harness, manifests, path):
    assert value_at(manifests, path) == SAME_VALUE[path]
    assert {value_at(s, path) for s in harness.values()} == {SAME_VALUE[path]}


def test_each_image_runs_the_command_the_harness_runs_for_its_role():
    def image_command(role: str) -> list[str]:
        text = (REPO / "deploy" / "docker" / f"Dockerfile.{role}").read_text()
        line = next(ln for ln in text.splitlines() if ln.startswith("CMD "))
        return yaml.safe_load(line.removeprefix("CMD "))

    def harness_command(argv: list[str]) -> list[str]:
        assert argv[: len(PYTHON_CLI)] == list(PYTHON_CLI)
        return ["openclaw-rl", *argv[len(PYTHON_CLI) :]]

    for pool in Pool:
        role = "trainer" if pool is Pool.TRAINER else f"worker-{pool.value}"
        assert image_command(role) == harness_command(worker_service(pool).argv), role
    assert image_command("api") == harness_command(api_service(Settings()).argv)
