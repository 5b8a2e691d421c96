"""The megatron torchrun job: `torchrun --nproc-per-node N ... -m trainers.megatron_job --spec job.json`.

Every rank builds its shard of the policy (trainers.megatron_parallel); rank 0
also serves the trainer-pool worker on a Unix socket (trainers.megatron_job_protocol).
On a node other than the worker's (`--from-rank0`, started by `openclaw-rl megatron-node`)
there is no spec file: the ranks join the rendezvous and receive the spec from rank 0.
Each command rank 0 reads is broadcast to all ranks, run by all, and answered by
rank 0. With distributed weight sync rank 0 is also the sending end of the servers'
weight-update group: it gathers the model and broadcasts it to them itself.
The job ends when the worker says stop or its connection closes; an error on any
rank ends that rank, torchrun then ends the others, and the worker reports the
crash with the job's log.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import sys
from datetime import timedelta
from pathlib import Path

import structlog
import torch
import torch.distributed as dist

from openclaw_rl.device import pick_device
from openclaw_rl.logs import configure_logging
from trainers.megatron_job_protocol import (
    COMMAND,
    RANK_FAILED,
    CloseWeightGroupCommand,
    Command,
    IdleCommand,
    JobSpec,
    LineChannel,
    Logprobs,
    LogprobsCommand,
    OpenWeightGroupCommand,
    Ready,
    Refused,
    Reply,
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
from trainers.megatron_parallel import ParallelMegatronTrainer
from trainers.weight_sync import RankZeroEnd, wire_dtype_named

log = structlog.get_logger(__name__)

ACCEPT_TIMEOUT_S = 300.0
"""How long rank 0 waits, once the model is loaded, for the worker that started the job to connect."""
COLLECTIVE_TIMEOUT = timedelta(hours=1)
"""Longest wait in one collective: the other ranks wait in a barrier while rank 0 writes a big model's export."""
IDLE_TICK_S = 30.0
"""How long rank 0 waits for a command before sending the other ranks an idle tick (far below gloo's timeout)."""


def init_distributed(device_name: str, spec: JobSpec | None) -> JobSpec:
    """torch.distributed from torchrun's environment, the job's spec (rank 0's, for ranks started without one), and
    megatron's tensor/pipeline/data groups."""
    from megatron.core import parallel_state

    device = pick_device(device_name)
    if device.type == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", timeout=COLLECTIVE_TIMEOUT)
    box: list[JobSpec | None] = [spec if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(box, src=0, device=torch.device("cuda") if device.type == "cuda" else None)
    spec = box[0]
    if spec is None:
        raise RuntimeError("rank 0 sent no job spec")
    if pick_device(spec.trainer.device).type != device.type:
        raise RuntimeError(f"this node runs on {device.type}, the job on {spec.trainer.device}: settings differ")
    parallel_state.initialize_model_parallel(
        tensor_model_parallel_size=spec.layout.tensor_parallel,
        pipeline_model_parallel_size=spec.layout.pipeline_parallel,
    )
    return spec


def run(trainer: ParallelMegatronTrainer, command: Command, sender: RankZeroEnd) -> Reply:
    """Collective: every rank runs the command; rank 0's reply is the one sent."""
    if isinstance(command, OpenWeightGroupCommand | StageWeightsCommand | SendBucketCommand | CloseWeightGroupCommand):
        return weight_sync(trainer, command, sender)
    if isinstance(command, StepCommand):
        metrics = trainer.train_step(command.samples)
        return Stepped(metrics=metrics, weights_finite=trainer.weights_finite())
    if isinstance(command, LogprobsCommand):
        return Logprobs(logprobs=trainer.response_logprobs(command.sample))
    if isinstance(command, SaveCommand):
        trainer.save_into(command.folder, distributed=command.distributed)
        dist.barrier()  # every rank's shard is on disk before the worker hears "saved"
        return Saved(step=trainer.step)
    raise TypeError(f"no handler for {type(command).__name__}")


def weight_sync(
    trainer: ParallelMegatronTrainer,
    command: OpenWeightGroupCommand | StageWeightsCommand | SendBucketCommand | CloseWeightGroupCommand,
    sender: RankZeroEnd,
) -> Reply:
    """Rank 0 is the sending end of the servers' weight-update group: the weights go from the job's ranks to the
    servers without passing through the pool's process or a disk. Only staging is collective (the gather); a failure
    on rank 0 is answered, never fatal: the pool falls back to a disk load and training goes on."""
    if isinstance(command, StageWeightsCommand):
        state = trainer.hf_state_dict()  # collective; {} on every rank but 0
        if dist.get_rank() != 0:
            return WeightsStaged(buckets=[])
    if dist.get_rank() != 0:
        return WeightSyncDone()
    try:
        if isinstance(command, StageWeightsCommand):
            return WeightsStaged(
                buckets=sender.stage(state, command.bucket_bytes, wire_dtype_named(command.wire_dtype))
            )
        if isinstance(command, OpenWeightGroupCommand):
            sender.open(command.group)
        elif isinstance(command, SendBucketCommand):
            sender.send(command.index)
        else:
            sender.close()
    except (RuntimeError, ValueError, OSError) as exc:  # DistBackendError and store timeouts included
        log.warning("weight sync failed on rank 0", op=command.op, error=str(exc)[:500])
        if not isinstance(command, CloseWeightGroupCommand):
            with contextlib.suppress(RuntimeError, ValueError, OSError):
                sender.close()  # a half-done broadcast leaves the group unusable: the pool sets up a new one
        return WeightSyncFailed(reason=f"{type(exc).__name__}: {str(exc)[:500]}")
    return WeightSyncDone()


def next_command(channel: LineChannel, parent: int) -> Command:
    """Rank 0: the worker's next command, an idle tick, or stop when the worker or torchrun is gone."""
    if os.getppid() != parent:
        log.warning("torchrun is gone; stopping")
        return StopCommand(worker_gone=True)
    try:
        line = channel.receive(IDLE_TICK_S)
    except (EOFError, ConnectionError):
        log.info("the trainer worker closed the connection; stopping")
        return StopCommand(worker_gone=True)
    if line is None:
        return IdleCommand()
    try:
        return COMMAND.validate_json(line)
    except ValueError as exc:
        channel.send(Refused(reason=str(exc)[:2000]))
        return IdleCommand()


def serve(trainer: ParallelMegatronTrainer, channel: LineChannel | None) -> StopCommand:
    control = dist.new_group(backend="gloo")  # commands are Python objects: broadcast on CPU whatever the device
    parent = os.getppid()
    sender = RankZeroEnd(trainer.device)
    while True:
        box: list[Command | None] = [next_command(channel, parent) if channel is not None else None]
        dist.broadcast_object_list(box, src=0, group=control)
        command = box[0]
        if isinstance(command, StopCommand):
            sender.close()
            return command
        if isinstance(command, IdleCommand):
            continue
        reply = run(trainer, command, sender)
        if channel is not None:
            channel.send(reply)


def listen(path: Path) -> socket.socket:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    return server


def main(argv: list[str] | None = None) -> int:
    rank = int(os.environ.get("RANK", "0"))
    configure_logging(process=f"megatron-rank{rank}")
    try:
        return serve_job(argv, rank)
    except BaseException as exc:
        if not isinstance(exc, SystemExit | KeyboardInterrupt):
            # One line the worker can quote; the traceback follows on stderr (torchrun's summary omits it).
            log.error(RANK_FAILED, rank=rank, error=f"{type(exc).__name__}: {str(exc)[:500]}")
        raise


def serve_job(argv: list[str] | None, rank: int) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--spec", type=Path, help="the job's JobSpec as JSON (written by the worker)")
    source.add_argument("--from-rank0", metavar="DEVICE", help="no spec here: receive rank 0's (device: auto|cpu|cuda)")
    args = parser.parse_args(argv)
    spec = JobSpec.model_validate_json(args.spec.read_text()) if args.spec else None
    spec = init_distributed(spec.trainer.device if spec else args.from_rank0, spec)
    server = listen(spec.socket_path) if rank == 0 else None  # early, so the worker's connect waits in the backlog
    trainer = ParallelMegatronTrainer(spec.checkpoint, spec.trainer, spec.layout.distributed_optimizer)
    if spec.resume:
        trainer.restore(spec.checkpoint)
    channel = None
    if server is not None:
        server.settimeout(ACCEPT_TIMEOUT_S)  # a worker that died before connecting must not leave the job behind
        conn, _ = server.accept()
        conn.settimeout(None)
        server.close()
        channel = LineChannel(conn)
        channel.send(Ready(step=trainer.step, world_size=dist.get_world_size(), device=str(trainer.device)))
    log.info("megatron job ready", rank=rank, world=dist.get_world_size(), step=trainer.step)
    stop = serve(trainer, channel)
    if channel is not None:
        channel.close()
        if stop.worker_gone:  # its folder (socket, spec, log) would otherwise stay behind
            shutil.rmtree(spec.socket_path.parent, ignore_errors=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
