"""The megatron torchrun job on CPU (gloo, two processes) against the one-process megatron trainer.

Real torchrun jobs of the tiny model: tensor parallel 2, data parallel 2, two pipeline
stages, and two stages of two tensor-parallel ranks give the same log-probs, step and
updated weights as one process; the Hugging Face export of
a TP-sharded model is the checkpoint it was loaded from, bit for bit; a version
saved in megatron's distributed format resumes into the same next step as an
uninterrupted run; a rank's crash reaches the caller as MegatronJobFailed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from openclaw_rl.settings import MegatronSettings
from rlmath.loss import LossConfig
from tests.helpers import CLI, REPO, free_port
from tests.trainers.test_megatron_trainer import BATCH
from trainers.trainer_config import TrainerConfig

pytest.importorskip("megatron.core", reason="the megatron extra is not installed")

from trainers import backend_class  # noqa: E402
from trainers.megatron_checkpoint import MEGATRON_CHECKPOINT_DIR  # noqa: E402
from trainers.megatron_convert import DenseArch, hf_to_mcore, mcore_to_hf, tp_merge, tp_split  # noqa: E402
from trainers.megatron_job_client import MegatronJobFailed, MegatronJobTrainer  # noqa: E402
from trainers.megatron_trainer import MegatronTrainer, load_hf_weights  # noqa: E402

CFG = TrainerConfig(lr=1e-3, micro_batch_tokens=12)  # one sample per micro-batch: accumulation too
TP2 = MegatronSettings(tensor_parallel=2, nproc_per_node=2)
DP2 = MegatronSettings(tensor_parallel=1, nproc_per_node=2)
PP2 = MegatronSettings(pipeline_parallel=2, nproc_per_node=2)  # the tiny model's two layers: one per stage
WEIGHT_TOLERANCE = 1e-4  # one AdamW step at lr 1e-3: float rounding of near-zero gradients moves a weight by less


@pytest.fixture(scope="module")
def one_process(tiny_model: Path) -> dict:
    """What one process computes for BATCH: log-probs before, the step's metrics, the weights and log-probs after."""
    trainer = MegatronTrainer(tiny_model, CFG)
    logprobs = [trainer.response_logprobs(s) for s in BATCH]
    metrics = trainer.train_step(BATCH)
    after = trainer.response_logprobs(BATCH[0])
    return {"logprobs": logprobs, "metrics": metrics, "weights": trainer.hf_state_dict(), "after": after}


def assert_same_step(job: MegatronJobTrainer, one_process: dict) -> None:
    for s, expected in zip(BATCH, one_process["logprobs"], strict=True):
        assert job.response_logprobs(s) == pytest.approx(expected, abs=1e-5)
    got, want = job.train_step(BATCH), one_process["metrics"]
    assert got.step == 1 and got.samples == 2 and got.tokens == want.tokens == 8
    assert got.loss == pytest.approx(want.loss, abs=1e-6)
    assert got.pg_loss == pytest.approx(want.pg_loss, abs=1e-6)
    assert got.grad_norm == pytest.approx(want.grad_norm, rel=1e-5)
    assert got.clip_fraction == want.clip_fraction and got.logprob_gap == pytest.approx(want.logprob_gap, rel=1e-5)
    assert job.weights_finite()
    moved = job.hf_state_dict()
    assert set(moved) == set(one_process["weights"])
    assert max(float((moved[k] - one_process["weights"][k]).abs().max()) for k in moved) < WEIGHT_TOLERANCE


def test_tensor_parallel_shards_round_trip_exactly(tiny_model):
    arch = DenseArch.from_hf_config(json.loads((tiny_model / "config.json").read_text()))
    hf = load_hf_weights(tiny_model)
    full = hf_to_mcore(arch, hf)
    shards = tp_split(arch, full, 2)
    qkv = "decoder.layers.0.self_attention.linear_qkv.weight"
    assert shards[0][qkv].shape[0] == full[qkv].shape[0] // 2  # one key-value group of two on each rank
    assert not torch.equal(shards[0][qkv], shards[1][qkv])
    back = mcore_to_hf(arch, tp_merge(arch, shards))
    assert set(back) == set(hf) and all(torch.equal(back[k], hf[k]) for k in hf)
    with pytest.raises(ValueError, match="num_key_value_heads=2"):
        tp_split(arch, full, 4)


def test_pipeline_parallel_job_matches_one_process_and_resumes_the_same_losses(tiny_model, one_process, tmp_path):
    """Two stages (the embedding and layer 0 on one, layer 1, the final norm and the tied output layer on the
    other): the same export, log-probs, step and weights as one process; its distributed checkpoint resumes the
    same next step, under pipeline stages and in one process."""
    job = MegatronJobTrainer.for_layout(PP2)(tiny_model, CFG)
    try:
        exported = job.hf_state_dict()
        source = load_hf_weights(tiny_model)
        assert set(exported) == set(source) and all(torch.equal(exported[k], source[k]) for k in source)
        assert_same_step(job, one_process)
        folder = job.save(tmp_path / "policy-1", version="1")
        assert (folder / MEGATRON_CHECKPOINT_DIR / "metadata.json").is_file()
        uninterrupted = [job.train_step(BATCH), job.train_step(BATCH)]
    finally:
        job.close()

    again = MegatronJobTrainer.for_layout(PP2).resume(folder, CFG)
    try:
        assert again.step == 1
        resumed = [again.train_step(BATCH), again.train_step(BATCH)]
    finally:
        again.close()
    for a, b in zip(uninterrupted, resumed, strict=True):
        assert (b.step, b.loss, b.grad_norm) == (a.step, pytest.approx(a.loss, abs=1e-7), pytest.approx(a.grad_norm))
    one = MegatronTrainer.resume(folder, CFG)  # the distributed format stores global layer numbers: PP 2 -> 1
    step = one.train_step(BATCH)
    assert (step.step, step.loss) == (2, pytest.approx(uninterrupted[0].loss, abs=1e-6))


def test_pipeline_job_with_a_reference_model_matches_one_process(tiny_model):
    """kl_coef > 0: each stage keeps its layers' frozen copy and the reference log-probs take their own pass through
    the stages. The KL term is 0 at the first step (policy = reference): the second step shows it."""
    cfg = TrainerConfig(lr=1e-3, micro_batch_tokens=12, loss=LossConfig(kl_coef=0.5))
    one = MegatronTrainer(tiny_model, cfg)
    want = [one.train_step(BATCH) for _ in range(2)]
    assert want[1].kl > 0
    job = MegatronJobTrainer.for_layout(PP2)(tiny_model, cfg)
    try:
        got = [job.train_step(BATCH) for _ in range(2)]
    finally:
        job.close()
    for g, w in zip(got, want, strict=True):
        assert g.loss == pytest.approx(w.loss, abs=1e-6) and g.kl == pytest.approx(w.kl, rel=1e-4, abs=1e-9)
        assert g.grad_norm == pytest.approx(w.grad_norm, rel=1e-5)


def test_pipeline_and_tensor_parallel_together_match_one_process(tiny_model, one_process):
    """Four ranks: two stages, each split over two tensor-parallel ranks (the export gathers both ways)."""
    job = MegatronJobTrainer.for_layout(MegatronSettings(pipeline_parallel=2, tensor_parallel=2, nproc_per_node=4))(
        tiny_model, CFG
    )
    try:
        exported = job.hf_state_dict()
        source = load_hf_weights(tiny_model)
        assert set(exported) == set(source) and all(torch.equal(exported[k], source[k]) for k in source)
        assert_same_step(job, one_process)
    finally:
        job.close()


def test_the_factory_picks_the_job_for_more_than_one_process():
    assert backend_class("megatron") is MegatronTrainer
    assert backend_class("megatron", MegatronSettings()) is MegatronTrainer
    job_cls = backend_class("megatron", TP2)
    assert issubclass(job_cls, MegatronJobTrainer) and job_cls.layout == TP2
    assert backend_class("megatron", PP2).layout == PP2
    two_nodes = MegatronSettings(nnodes=2, master_port=29500)
    assert backend_class("megatron", two_nodes).layout == two_nodes  # node 0: the trainer pool's
    with pytest.raises(ValueError, match="other nodes run `openclaw-rl megatron-node`"):
        backend_class("megatron", MegatronSettings(nnodes=2, node_rank=1, master_port=29500))


def test_tensor_parallel_job_matches_one_process_and_resumes_the_same_losses(tiny_model, one_process, tmp_path):
    job = MegatronJobTrainer.for_layout(TP2)(tiny_model, CFG)
    try:
        exported = job.hf_state_dict()  # HF -> megatron, sharded over two ranks -> HF
        source = load_hf_weights(tiny_model)
        assert set(exported) == set(source) and all(torch.equal(exported[k], source[k]) for k in source)
        assert_same_step(job, one_process)

        folder = job.save(tmp_path / "policy-1", version="1")
        assert (folder / MEGATRON_CHECKPOINT_DIR / "metadata.json").is_file()
        info = json.loads((folder / "openclaw-rl-version.json").read_text())
        assert info["weight_version"] == "1" and info["step"] == 1 and info["backend"] == "megatron"
        uninterrupted = [job.train_step(BATCH), job.train_step(BATCH)]
    finally:
        job.close()

    again = MegatronJobTrainer.for_layout(TP2).resume(folder, CFG)
    try:
        assert again.step == 1
        resumed = [again.train_step(BATCH), again.train_step(BATCH)]
    finally:
        again.close()
    for a, b in zip(uninterrupted, resumed, strict=True):  # the optimizer's moments came back too, not only weights
        assert (b.step, b.loss, b.grad_norm) == (a.step, pytest.approx(a.loss, abs=1e-7), pytest.approx(a.grad_norm))

    served = MegatronTrainer(folder, CFG)  # the export is a plain Hugging Face checkpoint
    assert served.step == 0 and served.response_logprobs(BATCH[0]) == pytest.approx(one_process["after"], abs=1e-4)
    # The distributed format stores global shapes: the same version resumes in one process (TP 2 -> 1).
    one = MegatronTrainer.resume(folder, CFG)
    assert one.step == 1
    for a in uninterrupted:
        b = one.train_step(BATCH)
        assert (
            b.step == a.step
            and b.loss == pytest.approx(a.loss, abs=1e-6)
            and b.grad_norm == pytest.approx(a.grad_norm, rel=1e-5)
        )


def test_data_parallel_job_matches_one_process_and_reports_a_crash(tiny_model, one_process, tmp_path):
    job = MegatronJobTrainer.for_layout(DP2)(tiny_model, CFG)
    try:
        assert_same_step(job, one_process)
        with pytest.raises(MegatronJobFailed, match="closed its connection") as failed:
            job.write_weights(tmp_path / "missing" / "folder")  # rank 0 cannot write there: it crashes
        assert any("rank=0" in line and "No such file" in line for line in failed.value.causes), str(failed.value)
        with pytest.raises(MegatronJobFailed):
            job.train_step(BATCH)  # the job is gone: every later call says so at once
    finally:
        job.close()


def test_a_two_node_job_matches_one_process_and_the_node_agent_serves_the_next_job(tiny_model, one_process, tmp_path):
    """Two "nodes" on this machine: the pool's torchrun (node 0) and `openclaw-rl megatron-node` (node 1), one rank
    each, tensor parallel across them; node 1 has no spec file and gets the job from rank 0."""
    port = free_port()
    layout = MegatronSettings(tensor_parallel=2, nproc_per_node=1, nnodes=2, master_port=port)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENCLAW_RL_")} | {
        "OPENCLAW_RL_DATA_DIR": str(tmp_path / "node1"),
        "OPENCLAW_RL_TRAINING__MEGATRON__NNODES": "2",
        "OPENCLAW_RL_TRAINING__MEGATRON__NODE_RANK": "1",
        "OPENCLAW_RL_TRAINING__MEGATRON__TENSOR_PARALLEL": "2",
        "OPENCLAW_RL_TRAINING__MEGATRON__MASTER_PORT": str(port),
    }
    with open(tmp_path / "node1.log", "wb") as out:
        agent = subprocess.Popen(CLI + ["megatron-node"], env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    try:
        job = MegatronJobTrainer.for_layout(layout)(tiny_model, CFG)
        try:
            assert job.job.ready.world_size == 2
            assert_same_step(job, one_process)
        finally:
            job.close()
        again = MegatronJobTrainer.for_layout(layout)(tiny_model, CFG)  # the agent waits for the next job
        try:
            assert again.response_logprobs(BATCH[0]) == pytest.approx(one_process["logprobs"][0], abs=1e-5)
        finally:
            again.close()
        assert agent.poll() is None, (tmp_path / "node1.log").read_text()
    finally:
        agent.terminate()
        agent.wait(timeout=60)
    log = (tmp_path / "node1.log").read_text()
    assert log.count("megatron job ended on this node") >= 2, log


def test_a_megatron_node_with_a_layout_it_cannot_serve_says_why(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENCLAW_RL_")} | {
        "OPENCLAW_RL_DATA_DIR": str(tmp_path),
        "OPENCLAW_RL_TRAINING__MEGATRON__NNODES": "2",
        "OPENCLAW_RL_TRAINING__MEGATRON__MASTER_PORT": "29500",
    }  # node_rank 0: the trainer pool's node
    out = subprocess.run(CLI + ["megatron-node"], env=env, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "node_rank must be 1..1" in out.stderr


WORKER = """
import sys, time
from pathlib import Path
from openclaw_rl.settings import MegatronSettings
from trainers.trainer_config import TrainerConfig
from trainers.megatron_job_client import MegatronJobTrainer

trainer = MegatronJobTrainer.for_layout(MegatronSettings(nproc_per_node=2))(Path(sys.argv[1]), TrainerConfig())
print("torchrun", trainer.job.proc.pid, trainer.job.run_dir, flush=True)
time.sleep(600)
"""


def running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie may wait for a reaper that never comes in a container)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_the_job_ends_when_its_worker_is_killed(tiny_model):
    worker = subprocess.Popen([sys.executable, "-c", WORKER, str(tiny_model)], stdout=subprocess.PIPE, cwd=REPO)
    try:
        lines = iter(worker.stdout.readline, b"")
        _, pid, folder = next(line for line in lines if line.startswith(b"torchrun ")).split()
        torchrun, run_dir = int(pid), Path(folder.decode())
        ranks = [int(p) for p in Path(f"/proc/{torchrun}/task/{torchrun}/children").read_text().split()]
        assert len(ranks) == 2 and all(map(running, [torchrun, *ranks]))
    finally:
        worker.kill()  # no close(), no finalizer: only the socket closing tells the job
        worker.wait()
    deadline = time.monotonic() + 60
    while any(map(running, [torchrun, *ranks])) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not any(map(running, [torchrun, *ranks])), "the job outlived its worker"
    assert not run_dir.exists()  # nor did its private folder
