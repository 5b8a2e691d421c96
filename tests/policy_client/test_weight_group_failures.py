"""A weight-update group that fails costs an update, never the process on either end, and never hangs it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch.distributed.distributed_c10d as c10d

from openclaw_rl.ports import free_port
from policy_client import weight_sync
from policy_client.weight_sync import NCCL_CLEAN_UP_ONLY, NCCL_ERROR_HANDLING, open_process_group

SILENT_RANK_ZERO = textwrap.dedent(
    """
    import os, sys, time, torch
    from policy_client.weight_sync import broadcast_bucket, open_process_group

    rank, port = int(sys.argv[1]), int(sys.argv[2])
    group = open_process_group("127.0.0.1", port, rank, 2, "silent", "gloo", 60)
    bucket = [torch.arange(4.0) if rank == 0 else torch.zeros(4)]
    broadcast_bucket(group, bucket, 5)
    print("received", bucket[0].tolist(), flush=True)
    if rank == 0:
        time.sleep(20)  # never sends the second bucket, never closes the group
    else:
        started = time.monotonic()
        try:
            broadcast_bucket(group, bucket, 1.5)
        except RuntimeError:
            print(f"raised after {time.monotonic() - started:.1f} s", flush=True)
        os._exit(0)  # not gloo's teardown, which waits for the silent peer
    """
)


def test_a_bucket_rank_zero_never_sends_raises_after_the_bucket_timeout_not_the_groups():
    port = free_port()
    run = [sys.executable, "-c", SILENT_RANK_ZERO]
    sender = subprocess.Popen([*run, "0", str(port)], stdout=subprocess.DEVNULL)
    try:
        out = subprocess.run([*run, "1", str(port)], capture_output=True, text=True, timeout=60).stdout
    finally:
        sender.kill()
        sender.wait()
    lines = out.splitlines()
    assert lines[0] == "received [0.0, 1.0, 2.0, 3.0]", out
    seconds = float(lines[1].split()[2])
    assert 1.4 <= seconds < 10, out  # the group's own timeout is 60 s


@pytest.mark.parametrize("operator_setting", [None, "1"])
def test_an_nccl_group_is_made_to_raise_and_the_processs_setting_is_kept(monkeypatch, operator_setting):
    """NCCL cannot run here: the group constructor is replaced by one that records what the real one would read."""
    if operator_setting is None:
        monkeypatch.delenv(NCCL_ERROR_HANDLING, raising=False)
    else:
        monkeypatch.setenv(NCCL_ERROR_HANDLING, operator_setting)
    seen: list[str | None] = []
    made: list[object] = []

    def constructor(*args, **kwargs):
        seen.append(os.environ.get(NCCL_ERROR_HANDLING))
        made.append(object())
        return made[-1], None

    monkeypatch.setattr(c10d, "_new_process_group_helper", constructor)
    try:
        open_process_group("127.0.0.1", free_port(), 0, 1, "nccl-group", "nccl", 5)
        open_process_group("127.0.0.1", free_port(), 0, 1, "gloo-group", "gloo", 5)
    finally:
        for group in made:
            c10d._world.pg_group_ranks.pop(group, None)
    assert seen == [NCCL_CLEAN_UP_ONLY, operator_setting]
    assert os.environ.get(NCCL_ERROR_HANDLING) == operator_setting
    assert weight_sync._env_lock.acquire(blocking=False)
    weight_sync._env_lock.release()
