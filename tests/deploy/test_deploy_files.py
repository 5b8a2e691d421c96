"""deploy/ checked without a container engine or a cluster: Dockerfiles linted, the compose file against the
Compose spec, Kubernetes manifests against the API schemas; and each worker pool has its image, service and
Deployment, with GPUs where the models run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from openclaw_rl.settings import Pool
from tests.helpers import REPO

DEPLOY = REPO / "deploy"
BIN = Path(sys.executable).parent
DOCKERFILES = sorted((DEPLOY / "docker").glob("Dockerfile.*"))
MANIFESTS = sorted((DEPLOY / "k8s").glob("*.yaml"))
COMPOSE = DEPLOY / "compose" / "docker-compose.yml"
GPU_ROLES = {"sglang-policy", "sglang-judge", "trainer"}


def _role(pool: Pool) -> str:
    return "trainer" if pool is Pool.TRAINER else f"worker-{pool.value}"


def _component(name: str, docs: list[dict]) -> str:
    """A workload's component (`worker-workflow` for every build's Deployment of the workflow pool)."""
    (doc,) = [d for d in docs if d["kind"] in ("Deployment", "StatefulSet") and d["metadata"]["name"] == name]
    return doc["metadata"].get("labels", {}).get("app.kubernetes.io/component", name)


def _by_component(workloads) -> dict[str, dict]:
    return {
        d["metadata"].get("labels", {}).get("app.kubernetes.io/component", d["metadata"]["name"]): d for d in workloads
    }


def _run(*argv: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_each_dockerfile_passes_hadolint(dockerfile: Path):
    done = _run(BIN / "hadolint", "--failure-threshold", "info", dockerfile)
    assert done.returncode == 0, done.stdout + done.stderr


def test_one_image_per_role_and_each_runs_its_own_pool():
    names = {p.name.removeprefix("Dockerfile.") for p in DOCKERFILES}
    assert names == {"api"} | {_role(p) for p in Pool}
    for pool in Pool:
        text = (DEPLOY / "docker" / f"Dockerfile.{_role(pool)}").read_text()
        assert f'CMD ["openclaw-rl", "worker", "--pool", "{pool.value}"]' in text


def test_the_compose_file_follows_the_compose_spec_and_runs_every_role():
    done = _run(BIN / "check-jsonschema", "--builtin-schema", "vendor.compose-spec", COMPOSE)
    assert done.returncode == 0, done.stdout + done.stderr
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    assert {"temporal", "temporal-ui", "postgresql", "valkey", "api"} <= services.keys()
    assert {_role(p) for p in Pool} <= services.keys()
    for role in GPU_ROLES:
        devices = services[role]["deploy"]["resources"]["reservations"]["devices"]
        assert devices[0]["capabilities"] == ["gpu"], role


def test_the_kubernetes_manifests_validate_against_the_api_schemas():
    done = _run(BIN / "kubernetes-validate", "--strict", "--quiet", *MANIFESTS)
    assert done.returncode == 0, done.stdout + done.stderr


def test_kubernetes_runs_each_pool_on_its_own_with_gpus_secrets_and_env_autoscaling():
    docs = [d for m in MANIFESTS for d in yaml.safe_load_all(m.read_text()) if d]
    workloads = _by_component(d for d in docs if d["kind"] in ("Deployment", "StatefulSet"))
    assert {f"worker-{p.value}" for p in Pool} | {"api", "sglang-policy", "sglang-judge"} <= workloads.keys()
    for name in ("worker-trainer", "sglang-policy", "sglang-judge"):
        (container,) = workloads[name]["spec"]["template"]["spec"]["containers"]
        assert container["resources"]["limits"]["nvidia.com/gpu"] == "1", name
        assert workloads[name]["spec"]["template"]["spec"]["nodeSelector"], name
    hpa = {
        _component(d["spec"]["scaleTargetRef"]["name"], docs) for d in docs if d["kind"] == "HorizontalPodAutoscaler"
    }
    assert "worker-env" in hpa
    secrets = [d for d in docs if d["kind"] == "Secret"]
    assert secrets and {"REDIS_URL", "OPENCLAW_RL_API_KEY_PEPPER"} <= secrets[0]["stringData"].keys()
    config = next(d for d in docs if d["kind"] == "ConfigMap")["data"]
    assert not any(k in config for k in secrets[0]["stringData"]), "a secret in the ConfigMap"


def test_kubernetes_runs_megatron_nodes_that_reach_the_trainer_pools_rendezvous():
    docs = [d for m in MANIFESTS for d in yaml.safe_load_all(m.read_text()) if d]
    nodes = next(d for d in docs if d["kind"] == "StatefulSet" and d["metadata"]["name"] == "megatron-node")
    (container,) = nodes["spec"]["template"]["spec"]["containers"]
    assert "openclaw-rl megatron-node" in " ".join(container["command"]) and "NODE_RANK" in container["command"][-1]
    assert {v["persistentVolumeClaim"]["claimName"] for v in nodes["spec"]["template"]["spec"]["volumes"]} >= {
        "openclaw-rl-trainer-data"
    }  # the checkpoints folder is one shared path on every node of the job
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    rendezvous = services["worker-trainer-rendezvous"]
    assert rendezvous["spec"]["selector"] == {"app.kubernetes.io/component": "worker-trainer"}
    assert rendezvous["spec"]["ports"][0]["port"] == 29500


TRAINER_GROUP = {"worker-trainer", "megatron-node"}
"""The trainer and a megatron job's nodes: the one group whose pods share a writable volume (one distributed
checkpoint written by every rank)."""


def test_no_pod_outside_the_trainer_group_shares_a_writable_volume_and_weights_travel_by_broadcast(monkeypatch):
    """docs/deployment.md, "What needs a shared disk": nothing. A pool's data dir is its own; the model files are
    mounted read-only; new weights are broadcast from the trainer (no disk fallback), as `bench hosts` runs them."""
    docs = [d for m in MANIFESTS for d in yaml.safe_load_all(m.read_text()) if d]
    for d in docs:
        if d["kind"] not in ("Deployment", "StatefulSet"):
            continue
        pod = d["spec"]["template"]["spec"]
        claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod.get("volumes", [])
                  if "persistentVolumeClaim" in v}  # fmt: skip
        for container in pod["containers"]:
            for mount in container.get("volumeMounts", []):
                if mount["name"] in claims and d["metadata"]["name"] not in TRAINER_GROUP:
                    assert mount.get("readOnly") is True, (d["metadata"]["name"], mount)
    config = next(d for d in docs if d["kind"] == "ConfigMap")["data"]
    for key in list(os.environ):
        if key.startswith("OPENCLAW_RL_") or key == "TEMPORAL_ADDRESS":
            monkeypatch.delenv(key)
    for key, value in config.items():
        monkeypatch.setenv(key, value)
    from openclaw_rl.settings import Settings

    sync = Settings().training.weight_sync
    assert (sync.mode, sync.disk_fallback, sync.master_port) == ("distributed", False, 29600)
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    assert sync.master_addr.split(".")[0] in services
    assert services[sync.master_addr.split(".")[0]]["spec"]["ports"][0]["port"] == sync.master_port


SCALED_ON_BACKLOG = {Pool.WORKFLOW: "workflow", Pool.POLICY: "activity", Pool.JUDGE: "activity", Pool.ENV: "activity"}
"""The pools an autoscaler adds replicas to, and the task type of their queue that says work is waiting. The trainer
runs one step at a time: one replica, no autoscaler."""


def test_each_scalable_pool_autoscales_on_its_task_queue_backlog_through_the_adapters_rule():
    docs = [d for m in MANIFESTS for d in yaml.safe_load_all(m.read_text()) if d]
    hpas = {
        _component(d["spec"]["scaleTargetRef"]["name"], docs): d for d in docs if d["kind"] == "HorizontalPodAutoscaler"
    }
    assert "worker-trainer" not in hpas
    for pool, task_type in SCALED_ON_BACKLOG.items():
        hpa = hpas[f"worker-{pool.value}"]["spec"]
        external = [m["external"] for m in hpa["metrics"] if m["type"] == "External"]
        assert [e["metric"]["name"] for e in external] == ["openclaw_task_queue_backlog"], pool
        assert external[0]["metric"]["selector"]["matchLabels"] == {"pool": pool.value, "task_type": task_type}
        assert external[0]["target"]["type"] == "AverageValue" and float(external[0]["target"]["averageValue"]) > 0
        assert hpa["minReplicas"] >= 1 and hpa["maxReplicas"] > hpa["minReplicas"]
    workloads = _by_component(d for d in docs if d["kind"] == "Deployment")
    config = next(d for d in docs if d["kind"] == "ConfigMap")["data"]
    from openclaw_rl.settings import POOL_METRICS_OFFSET

    for pool in Pool:  # each pool serves its metrics where Prometheus is told to scrape them
        pod = workloads[f"worker-{pool.value}"]["spec"]["template"]
        port = int(config["OPENCLAW_RL_METRICS__PORT_BASE"]) + POOL_METRICS_OFFSET[pool]
        assert pod["metadata"]["annotations"]["prometheus.io/port"] == str(port), pool
        assert {"name": "metrics", "containerPort": port} in pod["spec"]["containers"][0]["ports"], pool
    adapter = yaml.safe_load((DEPLOY / "k8s" / "prometheus-adapter" / "values.yaml").read_text())
    (rule,) = adapter["rules"]["external"]
    assert rule["name"]["as"] == "openclaw_task_queue_backlog" and "max by (pool, task_type)" in rule["metricsQuery"]


def test_the_workflow_pool_runs_one_deployment_per_build_polling_as_that_build():
    """Worker Versioning on a cluster: the Deployment, its pods and its autoscaler are named by the build, the build
    id comes from the pods' own label, and a new build waits to be promoted (the first makes itself current)."""
    docs = [d for d in yaml.safe_load_all((DEPLOY / "k8s" / "10-worker-workflow.yaml").read_text()) if d]
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    build = deployment["metadata"]["labels"]["openclaw-rl/build"]
    pod = deployment["spec"]["template"]
    assert deployment["metadata"]["name"] == f"worker-workflow-{build.replace('.', '-')}"
    assert (
        deployment["spec"]["selector"]["matchLabels"]["openclaw-rl/build"]
        == pod["metadata"]["labels"]["openclaw-rl/build"]
        == build
    )
    (container,) = pod["spec"]["containers"]
    assert container["image"].endswith(f":{build}")
    env = {e["name"]: e for e in container["env"]}
    field = env["OPENCLAW_RL_TEMPORAL__VERSIONING__BUILD_ID"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert field == "metadata.labels['openclaw-rl/build']"
    (hpa,) = [d for d in docs if d["kind"] == "HorizontalPodAutoscaler"]
    assert hpa["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]

    config = yaml.safe_load((DEPLOY / "k8s" / "01-config.yaml").read_text())["data"]
    from openclaw_rl.settings import Settings

    with pytest.MonkeyPatch.context() as mp:
        for k, v in {**config, "OPENCLAW_RL_TEMPORAL__VERSIONING__BUILD_ID": build}.items():
            mp.setenv(k, v)
        temporal = Settings().temporal
    assert temporal.versioned() and not temporal.makes_current_on_start()
    assert temporal.versioning.build_id == build
