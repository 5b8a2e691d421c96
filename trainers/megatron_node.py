"""`openclaw-rl megatron-node`: the ranks of a multi-node megatron job on a node other than the trainer pool's.

The trainer pool starts a torchrun job on node 0 whenever it (re)loads the policy (a resume, a retried step). Each
run here is one torchrun of this node's `nproc_per_node` ranks: it waits for node 0's rendezvous
(training.megatron.master_addr:master_port), receives the job's spec from rank 0, serves the job and ends with it;
then the agent waits for the next job. The checkpoints folder must be the same shared path on every node (each rank
reads the policy and writes its shard of the distributed checkpoint there). Ctrl-C or SIGTERM ends the agent and
the ranks it runs; a failed job is logged and the agent waits for the next one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import structlog

from openclaw_rl.settings import MegatronSettings
from trainers.megatron_job_client import REPO, torchrun_command

log = structlog.get_logger(__name__)

BETWEEN_JOBS_S = 1.0
"""Pause after a job ended before waiting for the next rendezvous (a failing setup must not spin)."""


def check_layout(layout: MegatronSettings) -> None:
    """A clear error for settings this agent cannot serve."""
    if layout.nnodes < 2:
        raise ValueError("training.megatron.nnodes is 1: a single-node job needs no megatron-node")
    if not 1 <= layout.node_rank < layout.nnodes:
        raise ValueError(
            f"training.megatron.node_rank must be 1..{layout.nnodes - 1} on a megatron node (node 0 is the "
            f"trainer pool's), got {layout.node_rank}"
        )


def serve_node(layout: MegatronSettings, device: str = "auto", jobs: int | None = None) -> int:
    """Run this node's ranks for `jobs` jobs (None: until stopped); the exit code of the last."""
    check_layout(layout)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    stop = {"now": False}
    proc: subprocess.Popen | None = None

    def on_signal(signum, _frame) -> None:
        stop["now"] = True
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # torchrun forwards it to the ranks

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    rc, served = 0, 0
    try:
        while not stop["now"] and (jobs is None or served < jobs):
            log.info(
                "waiting for a megatron job",
                node_rank=layout.node_rank,
                nnodes=layout.nnodes,
                rendezvous=f"{layout.master_addr}:{layout.master_port}",
            )
            proc = subprocess.Popen(torchrun_command(layout, None, device), cwd=REPO, env=env, start_new_session=True)
            rc = proc.wait()
            served += 1
            log.info("megatron job ended on this node", exit_code=rc)
            if not stop["now"]:
                time.sleep(BETWEEN_JOBS_S)
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for s, handler in previous.items():
            signal.signal(s, handler)
    return rc
