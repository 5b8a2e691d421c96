"""Megatron's distributed checkpoint format for the megatron backend, one process or a torchrun job alike.

A version folder holds the Hugging Face export the servers load and, under
`megatron/`, megatron.core.dist_checkpointing's sharded model and optimizer state
with the trainer's step. Tensors are stored by their global shape, so a version
saved under one tensor-parallel layout resumes under another (one process
included). The plain AdamW used without megatron's optimizer is sharded like the
weights its moments belong to, with megatron's own helpers.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.distributed as dist

from openclaw_rl.checkpoints import write_version_info
from trainers.trainer_state import TOKENIZER_FILES

MEGATRON_CHECKPOINT_DIR = "megatron"
"""The distributed checkpoint (model and optimizer, sharded as the ranks hold them) inside a version folder."""


def has_distributed_checkpoint(folder: Path) -> bool:
    return (Path(folder) / MEGATRON_CHECKPOINT_DIR).is_dir()


def save_distributed(folder: Path, state: dict) -> None:
    """Collective: `state` (sharded state dicts and plain values) under `folder/megatron`.

    `folder` must be on a file system every node sees (one node: any local folder)."""
    from megatron.core import dist_checkpointing

    target = Path(folder) / MEGATRON_CHECKPOINT_DIR
    if dist.get_rank() == 0:
        target.mkdir(parents=True, exist_ok=False)
    dist.barrier()
    with _cuda_free_checkpointing():
        dist_checkpointing.save(state, str(target))


def load_distributed(folder: Path, template: dict) -> dict:
    """Collective: the checkpoint under `folder/megatron`, loaded into the shapes of `template` (this rank's)."""
    from megatron.core import dist_checkpointing

    with _cuda_free_checkpointing():
        return dist_checkpointing.load(template, str(Path(folder) / MEGATRON_CHECKPOINT_DIR))


def adamw_sharded_state(opt: torch.optim.Optimizer, model_sharded: dict, is_loading: bool) -> dict:
    """A torch AdamW's moments as sharded tensors, each sharded like its weight."""
    from megatron.core.dist_checkpointing.optimizer import (
        get_param_id_to_sharded_param_map,
        optim_state_to_sharding_state,
    )

    params = [p for group in opt.param_groups for p in group["params"]]
    if is_loading:  # the template to load into needs every moment in place
        for p in params:
            opt.state[p] = {
                "step": torch.tensor(0.0),
                "exp_avg": torch.zeros_like(p),
                "exp_avg_sq": torch.zeros_like(p),
            }
    state = opt.state_dict()
    # AdamW's per-weight step count is a scalar (no shape to shard): it is the trainer's step, saved once beside.
    optim_state_to_sharding_state(
        state, get_param_id_to_sharded_param_map(model_sharded, params), exclude_keys=("step",)
    )
    return state


def restore_adamw(opt: torch.optim.Optimizer, loaded: dict, step: int) -> None:
    for state in loaded["state"].values():
        state["step"] = torch.tensor(float(step))  # one AdamW step per trainer step: every weight gets a gradient
    opt.load_state_dict(loaded)


def complete_version_folder(folder: Path, source: Path, info: dict) -> None:
    """What makes a version folder servable alone (tokenizer, chat template) and labelled (its version info)."""
    for name in TOKENIZER_FILES:
        if (source / name).is_file() and not (folder / name).exists():
            shutil.copy2(source / name, folder / name)
    write_version_info(folder, info)


@contextlib.contextmanager
def _cuda_free_checkpointing() -> Iterator[None]:
    """megatron's torch_dist checkpoint strategy waits on the CUDA stream after copying tensors to host memory and
    puts its failure flag on the current CUDA device; with a CPU-only torch (the gloo job, the tests) the wait has
    nothing to wait for and the flag belongs on the CPU. Only for the duration of a save or load, only without CUDA."""
    if torch.cuda.is_available():
        yield
        return
    saved = torch.cuda.synchronize, torch.cuda.current_device
    torch.cuda.synchronize = lambda device=None: None
    torch.cuda.current_device = lambda: "cpu"  # type: ignore[assignment]  # only ever used as a tensor's device
    try:
        yield
    finally:
        torch.cuda.synchronize, torch.cuda.current_device = saved
