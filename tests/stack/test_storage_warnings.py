"""`up` says at start when the data disk cannot hold training's checkpoints, and when the store would exit on a full
disk: with the numbers, in its log and its banner."""

from __future__ import annotations

from pathlib import Path

import pytest

from openclaw_rl.checkpoints import checkpoint_bytes
from openclaw_rl.settings import Settings
from stack.launcher import Stack
from stack.preflight import GB, disk_room_problem
from tests.stack.tmpfs import small_tmpfs


def test_the_disk_check_counts_two_checkpoints_and_the_reserve():
    ckpt, reserve = 3 * GB, 2 * GB
    assert disk_room_problem(8 * GB, ckpt, reserve) is None  # exactly 2 x 3 + 2
    why = disk_room_problem(8 * GB - 1, ckpt, reserve)
    assert why is not None
    for figure in ("8.00 GB free", "2 x 3.00 GB", "(2.00 GB)", "= 8.00 GB"):
        assert figure in why, why
    assert disk_room_problem(10 * GB, ckpt, reserve, checkpoints=3) is not None  # 3 x 3 + 2 = 11


def test_up_warns_when_the_data_disk_cannot_hold_two_checkpoints(tmp_path: Path, tiny_model: Path):
    one = checkpoint_bytes(tiny_model)
    assert one > 50_000_000  # weights and optimizer state of the tiny model: ~120 MB
    with small_tmpfs(tmp_path / "small-disk", "64m") as disk:
        stack = Stack(Settings(data_dir=disk, engine={"model_path": str(tiny_model)}))
        stack.prepare_data_dir()
        stack.warn_about_storage()
        assert len(stack.warnings) == 1, stack.warnings
        assert f"2 x {one / GB:.2f} GB" in stack.warnings[0] and "disk_reserve_gb (2.00 GB)" in stack.warnings[0]
        assert "  storage      WARNING: the data disk has 0.0" in stack.banner()


def test_no_warning_with_room_and_one_for_appendfsync_always(tmp_path: Path, tiny_model: Path):
    import shutil

    free = shutil.disk_usage(tmp_path).free
    if free < 2 * checkpoint_bytes(tiny_model) + 2 * GB:
        pytest.skip(f"this machine's disk has only {free / GB:.1f} GB free")
    stack = Stack(Settings(data_dir=tmp_path / "data", engine={"model_path": str(tiny_model)}))
    stack.prepare_data_dir()
    stack.warn_about_storage()
    assert stack.warnings == [] and "  storage " not in stack.banner()
    stack = Stack(
        Settings(data_dir=tmp_path / "data", engine={"model_path": str(tiny_model)}, redis={"appendfsync": "always"})
    )
    stack.warn_about_storage()
    assert len(stack.warnings) == 1 and "appendfsync=always" in stack.warnings[0]
