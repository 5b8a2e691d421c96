"""An engine that restarts serves the newest trained version, not the base model as version 0."""

from __future__ import annotations

from engine.main import newest_trained
from openclaw_rl.checkpoints import version_dir, write_version_info
from openclaw_rl.settings import Settings


def test_a_restarted_engine_picks_the_newest_complete_checkpoint(tmp_path):
    settings = Settings(data_dir=tmp_path)
    base = tmp_path / "base"
    assert newest_trained(settings, base) == base  # nothing trained yet
    for v in (2, 3):
        folder = version_dir(settings.checkpoints_dir, v)
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
        write_version_info(folder, {"weight_version": str(v)})
    assert newest_trained(settings, base) == version_dir(settings.checkpoints_dir, 3)
    (version_dir(settings.checkpoints_dir, 3) / "config.json").unlink()  # not a servable checkpoint
    assert newest_trained(settings, base) == base
