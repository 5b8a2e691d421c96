"""Checks for files-fix-permissions (run with cwd /app)."""

import stat
from pathlib import Path

APP = Path.cwd()


def mode(rel: str) -> int:
    return stat.S_IMODE((APP / rel).stat().st_mode)


def test_scripts_executable():
    assert mode("bin/build.sh") == 0o755
    assert mode("bin/deploy.sh") == 0o755


def test_other_bin_files_untouched():
    assert mode("bin/README.txt") == 0o644


def test_secret_key_private():
    assert mode("secrets/api.key") == 0o600
    assert (APP / "secrets/api.key").read_text() == "sk-test-0000\n"


def test_secrets_folder_private():
    assert mode("secrets") == 0o700


def test_public_tree_readable():
    public = APP / "public"
    for p in [public, *public.rglob("*")]:
        want = 0o755 if p.is_dir() else 0o644
        assert stat.S_IMODE(p.stat().st_mode) == want, p
