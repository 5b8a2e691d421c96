from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from openclaw_rl import ports
from tests.helpers import CLI, REPO, free_port, wait_http

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# One torch thread per process, inherited by every process a test starts: two test workers and their stacks already
# keep both cores busy, and OpenMP's extra threads only spin against each other (three 2-thread torch processes on 2
# loaded cores took 60 s for what 1 thread each did in 3 s). Tests that need threads set them (test_engine_threads).
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _own_port_slice() -> None:
    """Under pytest-xdist each worker starts services on its own slice of ports: two workers drawing from one
    range collide (a port drawn by one is free until its service binds, seconds later, so the other draws it too)."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker.startswith("gw") or count < 2 or os.environ.get(ports.RANGE_ENV):
        return
    low, top = ports.LOWEST, ports._ephemeral_start()
    width = (top - low) // count
    first = low + int(worker[2:]) * width
    os.environ[ports.RANGE_ENV] = f"{first}-{first + width - 1}"


_own_port_slice()


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built-in tiny Qwen3 checkpoint, built once per test session."""
    from engine.tiny_qwen3 import ensure_tiny_model

    return ensure_tiny_model(tmp_path_factory.mktemp("models") / "tiny-qwen3")


def start_engine(model: Path, data_dir: Path, **env_extra: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENCLAW_RL_")}
    env.update(OPENCLAW_RL_DATA_DIR=str(data_dir), OPENCLAW_RL_ENGINE__TORCH_THREADS="1", **env_extra)
    log = open(data_dir / f"engine-{port}.log", "wb")
    proc = subprocess.Popen(
        CLI + ["engine", "--model", str(model), "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=REPO,
    )
    url = f"http://127.0.0.1:{port}"
    wait_http(f"{url}/health", timeout=120, proc=proc)
    return proc, url


@pytest.fixture(scope="session")
def engine_url(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    """A real embedded engine process serving the tiny model (read-only use: no weight updates)."""
    proc, url = start_engine(tiny_model, tmp_path_factory.mktemp("engine"))
    yield url
    proc.terminate()
    proc.wait(timeout=30)


# ---- test tiers (tests/tiers.py): `stack` and `learns` applied at collection, the fast tier guarded -----------------

from tests.tiers import apply as _apply_tiers  # noqa: E402
from tests.tiers import guard_services  # noqa: E402, F401  (an autouse fixture)
from tests.tiers import make_scheduler as _make_scheduler  # noqa: E402


@pytest.hookimpl(optionalhook=True)  # an xdist hook: `-p no:xdist` must still run
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    return _make_scheduler(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _apply_tiers(items)
