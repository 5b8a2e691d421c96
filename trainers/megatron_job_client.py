"""The megatron backend for layouts beyond one process: a PolicyTrainer that drives a torchrun job.

The trainer pool uses it like any backend (step, save, resume, write_weights);
the weights, optimizer and step live in the job's ranks (trainers.megatron_job).
The job runs in its own session and is ended when this trainer is closed or
dropped; when the worker process dies, its socket closes and the job stops by
itself. A rank that crashes surfaces here as MegatronJobFailed with the end of
the job's log.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar, TypeVar

import structlog
import torch
from pydantic import BaseModel

from contracts.training import StepMetrics
from openclaw_rl.checkpoints import atomic_dir
from openclaw_rl.settings import MegatronSettings
from policy_client.weight_sync import WeightSyncError, dtype_name
from store.samples import TrainingSample
from trainers.base import PolicyTrainer
from trainers.megatron_checkpoint import complete_version_folder
from trainers.megatron_job_protocol import (
    RANK_FAILED,
    REPLY,
    CloseWeightGroupCommand,
    JobSpec,
    LineChannel,
    Logprobs,
    LogprobsCommand,
    OpenWeightGroupCommand,
    Ready,
    Refused,
    SaveCommand,
    Saved,
    SendBucketCommand,
    StageWeightsCommand,
    StepCommand,
    Stepped,
    StopCommand,
    WeightsStaged,
    WeightSyncDone,
    WeightSyncFailed,
)
from trainers.megatron_trainer import load_hf_weights
from trainers.trainer_config import TrainerConfig
from trainers.weight_sync import BucketSpec, GroupSpec

log = structlog.get_logger(__name__)

REPO = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 900.0
"""Until the job has loaded the policy on every rank and answered; big models take minutes."""
STOP_TIMEOUT_S = 30.0
"""A stop is answered by the job exiting; past this it is terminated, then killed."""
POLL_S = 1.0
"""How often a wait checks that the job is still alive."""
LOG_TAIL_LINES = 40

R = TypeVar("R", bound=BaseModel)


class MegatronJobFailed(RuntimeError):
    """The torchrun job ended (a rank crashed, or it was killed) or broke the protocol."""

    def __init__(self, why: str, log_path: Path):
        # The log is read now: the job's private folder goes once the job has been ended.
        try:
            lines = Path(log_path).read_text(errors="replace").splitlines()
        except OSError:
            lines = ["(the job's log is unreadable)"]
        self.why = why
        self.causes = [line for line in lines if RANK_FAILED in line][:4]
        """Each failed rank's own one-line reason (torchrun's summary below them names only exit codes)."""
        self.log_tail = "\n".join(lines[-LOG_TAIL_LINES:])
        super().__init__(why, self.causes, self.log_tail)

    def __str__(self) -> str:
        causes = "".join(f"\n  {c}" for c in self.causes) or " none logged"
        return f"the megatron job failed: {self.why}. Ranks' errors:{causes}\nThe end of its log:\n{self.log_tail}"


def torchrun_command(layout: MegatronSettings, spec_path: Path | None, device: str = "auto") -> list[str]:
    """torchrun on this node: a free rendezvous port unless settings pin one (training.megatron.master_port).

    Node 0 (the trainer pool's) reads the spec from `spec_path`; other nodes (spec_path None, `megatron-node`)
    receive it from rank 0 once every node has joined the rendezvous on node 0's master_addr:master_port.
    """
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={layout.nproc_per_node}"]
    if layout.master_port is None:
        cmd += ["--standalone"]
    else:
        node_rank = 0 if spec_path is not None else layout.node_rank
        cmd += [
            f"--nnodes={layout.nnodes}",
            f"--node-rank={node_rank}",
            f"--master-addr={layout.master_addr}",
            f"--master-port={layout.master_port}",
        ]
    source = ["--spec", str(spec_path)] if spec_path is not None else ["--from-rank0", device]
    return cmd + ["-m", "trainers.megatron_job", *source]


class MegatronJob:
    """One torchrun job and the connection to its rank 0."""

    def __init__(self, spec_fields: dict, layout: MegatronSettings):
        # A private, short folder: a Unix socket's path is limited to 107 bytes.
        self.layout = layout
        self.run_dir = Path(tempfile.mkdtemp(prefix="ocrl-megatron-"))
        self.log_path = self.run_dir / "job.log"
        spec = JobSpec(layout=layout, socket_path=self.run_dir / "control.sock", **spec_fields)
        spec_path = self.run_dir / "spec.json"
        spec_path.write_text(spec.model_dump_json())
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
        with open(self.log_path, "wb") as out:
            self.proc = subprocess.Popen(
                torchrun_command(layout, spec_path),
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=REPO,
                env=env,
                start_new_session=True,  # its own process group: ended as one, never by a signal meant for us
            )
        self._finalizer = weakref.finalize(self, _end, self.proc, self.run_dir)
        self._asking = threading.Lock()  # one command at a time: a reply belongs to the command before it
        self.channel = self._connect(spec.socket_path)
        self.ready = self._receive(Ready, START_TIMEOUT_S)
        log.info("megatron job started", pid=self.proc.pid, world=self.ready.world_size, step=self.ready.step)

    def _connect(self, path: Path) -> LineChannel:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            self._check_alive("before it listened")
            if path.exists():
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    sock.connect(str(path))
                    return LineChannel(sock)
                except (FileNotFoundError, ConnectionRefusedError):
                    sock.close()
            if time.monotonic() > deadline:
                why = f"rank 0 did not listen within {START_TIMEOUT_S:.0f}s"
                if self.layout.nnodes > 1:
                    why += (
                        f" (a {self.layout.nnodes}-node job starts once every node joined the rendezvous at "
                        f"{self.layout.master_addr}:{self.layout.master_port}: is `openclaw-rl megatron-node` "
                        "running on each other node?)"
                    )
                raise MegatronJobFailed(why, self.log_path)
            time.sleep(0.2)

    def ask(self, command: BaseModel, expect: type[R]) -> R:
        """Send `command` and wait for its reply; blocking, callable from any thread (weight sync asks from
        asyncio's worker threads)."""
        with self._asking:
            try:
                self.channel.send(command)
            except OSError as exc:
                raise MegatronJobFailed(f"the job's connection broke ({exc})", self.log_path) from exc
            return self._receive(expect, None)

    def _receive(self, expect: type[R], timeout_s: float | None) -> R:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            try:
                line = self.channel.receive(POLL_S)
            except (EOFError, ConnectionError) as exc:
                self._wait_exit(STOP_TIMEOUT_S)
                raise MegatronJobFailed(f"the job closed its connection ({self._exit_text()})", self.log_path) from exc
            if line is not None:
                break
            self._check_alive("while working")
            if deadline is not None and time.monotonic() > deadline:
                raise MegatronJobFailed(f"no answer within {timeout_s:.0f}s", self.log_path)
        reply = REPLY.validate_json(line)
        if isinstance(reply, Refused):
            raise MegatronJobFailed(f"the job refused a command: {reply.reason}", self.log_path)
        if isinstance(reply, WeightSyncFailed):
            raise WeightSyncError(None, "megatron job rank 0", reply.reason)
        if not isinstance(reply, expect):
            raise MegatronJobFailed(f"expected {expect.__name__}, the job answered {reply.kind}", self.log_path)
        return reply

    def _check_alive(self, when: str) -> None:
        if self.proc.poll() is not None:
            raise MegatronJobFailed(f"the job exited {when} ({self._exit_text()})", self.log_path)

    def _wait_exit(self, timeout_s: float) -> None:
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            pass

    def _exit_text(self) -> str:
        code = self.proc.poll()
        return "still running" if code is None else f"exit status {code}"

    def stop(self) -> None:
        """Ask the job to stop; past STOP_TIMEOUT_S end it. The folder (log included) goes once it has exited."""
        if self.proc.poll() is None:
            try:
                self.channel.send(StopCommand())
            except OSError:
                pass  # already gone: the ending below covers it
            self._wait_exit(STOP_TIMEOUT_S)
        self.channel.close()
        self._finalizer()


def _end(proc: subprocess.Popen, run_dir: Path) -> None:
    """End the job (torchrun forwards SIGTERM to its ranks), then remove its private folder."""
    if proc.poll() is None:
        for sig, grace in ((signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(grace)
                break
            except subprocess.TimeoutExpired:
                continue
    shutil.rmtree(run_dir, ignore_errors=True)


class MegatronJobTrainer(PolicyTrainer):
    """The trainer pool's face of a torchrun job; `for_layout` binds the parallel layout from settings."""

    backend = "megatron"
    layout: ClassVar[MegatronSettings] = MegatronSettings()

    @classmethod
    def for_layout(cls, layout: MegatronSettings) -> type[MegatronJobTrainer]:
        if layout.node_rank != 0:
            raise ValueError(
                f"training.megatron.node_rank is {layout.node_rank}: the trainer pool runs node 0 of a megatron job "
                "(its rank 0 serves the pool); other nodes run `openclaw-rl megatron-node`"
            )
        return type(cls.__name__, (cls,), {"layout": layout})

    def __init__(self, checkpoint: Path, cfg: TrainerConfig = TrainerConfig(), *, resume: bool = False):
        self.cfg = cfg
        self.source = Path(checkpoint)
        self.device = torch.device("cpu")  # this process holds no weights: they live in the job's ranks
        self.model = torch.nn.Module()  # ditto; weights_finite() answers for the job's weights
        self.ref = None
        self._weights_finite = True
        self.job = MegatronJob({"checkpoint": self.source, "resume": resume, "trainer": cfg}, self.layout)
        self.step = self.job.ready.step

    @classmethod
    def resume(cls, folder: Path, cfg: TrainerConfig = TrainerConfig()) -> MegatronJobTrainer:
        """The job at a saved version: its distributed checkpoint (weights, optimizer, step) when it has one."""
        return cls(folder, cfg, resume=True)

    @property
    def bf16_on_cuda(self) -> bool:
        """The job's ranks train (this process holds no weights): bf16 on CUDA unless precision says fp32."""
        return self.cfg.precision != "fp32" and self.job.ready.device.startswith("cuda")

    def close(self) -> None:
        self.job.stop()

    def train_step(self, samples: list[TrainingSample], staleness: Mapping[str, int] | None = None) -> StepMetrics:
        """`staleness` is not sent to the job: its ranks count every sample as of their weights (the mismatch
        figures come back without the per-sample ones, which stay in the job)."""
        reply = self.job.ask(StepCommand(samples=samples), Stepped)
        self.step = reply.metrics.step
        self._weights_finite = reply.weights_finite
        return reply.metrics

    def weights_finite(self) -> bool:
        """Whether the last step left every rank's weights finite (the pool's check before saving)."""
        return self._weights_finite

    def response_logprobs(self, sample: TrainingSample) -> list[float]:
        return self.job.ask(LogprobsCommand(sample=sample), Logprobs).logprobs

    def response_logits(self, model: torch.nn.Module, group: list[TrainingSample]) -> tuple[torch.Tensor, torch.Tensor]:
        raise TypeError("the megatron job's logits stay in its ranks; ask for response_logprobs or train_step")

    def write_weights(self, folder: Path) -> None:
        self.job.ask(SaveCommand(folder=Path(folder).resolve(), distributed=False), Saved)

    def weight_rank_zero(self) -> JobRankZero:
        """Distributed weight sync sends from the job's rank 0, which holds the weights (see JobRankZero)."""
        return JobRankZero(self.job)

    def hf_state_dict(self) -> dict[str, torch.Tensor]:
        with tempfile.TemporaryDirectory(prefix="ocrl-export-") as tmp:
            self.write_weights(Path(tmp))
            return load_hf_weights(Path(tmp))

    def save(self, folder: Path, version: str, extra: dict | None = None) -> Path:
        """The Hugging Face export the servers load, plus megatron's distributed checkpoint (`megatron/`) to resume."""
        with atomic_dir(Path(folder)) as tmp:
            saved = self.job.ask(SaveCommand(folder=Path(tmp).resolve(), distributed=True), Saved)
            complete_version_folder(
                tmp,
                self.source,
                {"weight_version": version, "step": saved.step, "backend": self.backend, **(extra or {})},
            )
        return Path(folder)


class JobRankZero:
    """The sending end of weight sync in a megatron job's rank 0 (for trainers.weight_sync.WeightBroadcaster): the
    job gathers the whole model on its rank 0 and broadcasts it to the servers from there, on its own device (NCCL
    from the GPU when the job trains on CUDA); the weights never pass through this process or a disk.

    Every call is one blocking command to the job, run in a thread. The job's rendezvous cannot be abandoned half
    way, so a group that fails to open is waited out (rank 0 gives up after the group's timeout) before the job gets
    another command."""

    sends_own_weights = True

    def __init__(self, job: MegatronJob):
        self.job = job
        self.device = torch.device(job.ready.device)

    async def open_group(self, spec: GroupSpec, joins: list[asyncio.Future]) -> None:
        opened = asyncio.ensure_future(
            asyncio.to_thread(self.job.ask, OpenWeightGroupCommand(group=spec), WeightSyncDone)
        )
        try:
            await asyncio.wait_for(asyncio.gather(*joins), timeout=spec.timeout_s + 5)
        finally:
            outcome = (await asyncio.gather(opened, return_exceptions=True))[0]
        if isinstance(outcome, BaseException):
            raise outcome

    async def stage(
        self, state: dict[str, torch.Tensor] | None, bucket_bytes: int, wire_dtype: torch.dtype | None
    ) -> list[BucketSpec]:
        if state is not None:
            raise TypeError("a megatron job sends its own weights")
        wire = None if wire_dtype is None else dtype_name(wire_dtype)
        command = StageWeightsCommand(bucket_bytes=bucket_bytes, wire_dtype=wire)
        return (await asyncio.to_thread(self.job.ask, command, WeightsStaged)).buckets

    async def send_bucket(self, index: int) -> None:
        await asyncio.to_thread(self.job.ask, SendBucketCommand(index=index), WeightSyncDone)

    async def close_group(self) -> None:
        if self.job.proc.poll() is None:  # an ended job took its group with it
            await asyncio.to_thread(self.job.ask, CloseWeightGroupCommand(), WeightSyncDone)
