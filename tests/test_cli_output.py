"""The commands' tables and errors in openclaw_rl/console.py's style, in-process (fakes for the store and Temporal):
stable headers, parseable rows without ANSI codes off a terminal, errors on stderr with the command's prefix."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest

from cli import admin, episodes
from control.audit import SessionInfo
from openclaw_rl.settings import Settings

ANSI = "\x1b["
T0 = datetime(2026, 3, 1, 9, 30, tzinfo=timezone.utc)


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(data_dir=tmp_path)


class _Db:
    api_keys = None
    users = SimpleNamespace()

    async def aclose(self) -> None:
        pass


class _Keys:
    def __init__(self, records, pepper):
        pass

    async def list(self):
        return [
            SimpleNamespace(key_id="3f2a9c01d4e5", user_id="alice", created_at=T0, revoked_at=None),
            SimpleNamespace(key_id="b1", user_id="bob", created_at=T0, revoked_at=T0),
        ]

    async def revoke(self, key_id):
        return None


@pytest.fixture
def fake_keys(monkeypatch):
    import control.api_keys

    monkeypatch.setattr(admin.Store, "from_settings", staticmethod(lambda s: _Db()))
    monkeypatch.setattr(control.api_keys, "KeyStore", _Keys)


async def test_keys_list_is_a_table_and_an_unknown_key_an_error_on_stderr(settings, fake_keys, capsys):
    assert await admin.keys_command(argparse.Namespace(keys_command="list"), settings) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert ANSI not in out and err == ""
    assert lines[0].startswith("KEY ID") and lines[0].split()[2:] == ["USER", "CREATED", "(UTC)", "STATE"]
    assert lines[1].split() == ["3f2a9c01d4e5", "alice", "2026-03-01", "09:30", "active"]
    assert lines[2].split() == ["b1", "bob", "2026-03-01", "09:30", "revoked", "2026-03-01", "09:30"]
    assert lines[0].index("USER") == lines[1].index("alice") == lines[2].index("bob")

    assert await admin.keys_command(argparse.Namespace(keys_command="revoke", key_id="nope"), settings) == 1
    out, err = capsys.readouterr()
    assert out == "" and err == "openclaw-rl keys: no key with id nope (see `openclaw-rl keys list`)\n"


async def test_sessions_table_and_json_unchanged(settings, monkeypatch, capsys):
    import control.audit

    sessions = [
        SessionInfo(
            session_id="s-1",
            user_id="alice",
            workflow_id="session/alice/s-1",
            run_id="r",
            status="running",
            started_at=T0,
            closed_at=None,
            policy_version=3,
        ),
        SessionInfo(
            session_id="s-2",
            user_id="bob",
            workflow_id="session/bob/s-2",
            run_id="r",
            status="completed",
            started_at=None,
            closed_at=None,
            policy_version=None,
        ),
    ]

    async def fake_client(settings, command=None):
        return None

    async def fake_list(client, user, limit, store=None):
        return sessions

    monkeypatch.setattr(admin, "_client", fake_client)
    monkeypatch.setattr(control.audit, "list_sessions", fake_list)
    await admin.sessions_command(argparse.Namespace(user=None, limit=50, json=False), settings)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["SESSION", "USER", "STATUS", "STARTED", "(UTC)", "POLICY"]
    assert lines[1].split() == ["s-1", "alice", "running", "2026-03-01", "09:30", "3"]
    assert lines[2].split() == ["s-2", "bob", "completed", "-", "-"]
    await admin.sessions_command(argparse.Namespace(user=None, limit=50, json=True), settings)
    import json

    assert json.loads(capsys.readouterr().out)[0]["session_id"] == "s-1"


async def test_sessions_show_users_by_name_where_temporal_holds_pseudonyms():
    """`OpenclawUser` is a pseudonym on new sessions and the user id on old ones: both show the name while the user
    exists; a forgotten user's pseudonym (no name record left) shows as it is."""
    from contracts.chat import tenant_of
    from control.audit import list_sessions
    from openclaw_rl.search_attributes import SESSION_ID, USER_ID

    owners = {"s-new": tenant_of("alice"), "s-old": "alice", "s-gone": tenant_of("zoe")}
    queries = []

    class Client:
        async def list_workflows(self, query, limit):
            queries.append(query)
            for sid, owner in owners.items():
                yield SimpleNamespace(
                    id=f"session/{owner}/{sid}",
                    run_id="r",
                    status=None,
                    start_time=T0,
                    close_time=None,
                    typed_search_attributes={SESSION_ID: sid, USER_ID: owner},
                )

    class Users:
        async def names_of(self, tenants):
            return {t: "alice" for t in tenants if t == tenant_of("alice")}

    shown = await list_sessions(Client(), store=SimpleNamespace(users=Users()))
    assert {s.session_id: s.user_id for s in shown} == {"s-new": "alice", "s-old": "alice", "s-gone": tenant_of("zoe")}
    await list_sessions(Client(), "alice")
    assert f"OpenclawUser IN ('{tenant_of('alice')}', 'alice')" in queries[-1]  # one user's: both forms asked for


class _Client:
    """Just enough of a Temporal client for `episodes list`: running episodes (no results fetched)."""

    async def list_workflows(self, query, limit):
        for i, task in enumerate(("files-dedupe", "text-top-ips")):
            yield SimpleNamespace(
                id=f"episode/{task}-{i}",
                status=None,
                typed_search_attributes={episodes.SETTING: "terminal", episodes.TASK_ID: task},
                start_time=T0,
            )


async def test_episodes_list_is_a_table_with_right_aligned_numbers(settings, capsys):
    args = argparse.Namespace(episodes_command="list", workflow_queue="q")
    assert await episodes.episodes_command(args, settings, client=_Client()) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["EPISODE", "STATUS", "SETTING", "TASK", "STEPS", "OUTCOME", "REWARD"]
    assert lines[1].split() == ["episode/files-dedupe-0", "unknown", "terminal", "files-dedupe", "-", "-", "-"]
    assert lines[0].endswith("REWARD") and len(lines[1]) == len(lines[0])  # numbers end under their header


async def test_episodes_tasks_table_and_an_unknown_setting(settings, capsys):
    args = argparse.Namespace(episodes_command="tasks", setting="toolcall", json=False)
    assert await episodes.episodes_command(args, settings) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert ANSI not in out and err == ""
    assert lines[0].split() == ["SETTING", "TASK", "CATEGORY", "TITLE"]
    assert all(line.startswith("toolcall  ") for line in lines[1:-1]) and lines[-1] == f"{len(lines) - 2} tasks"
    args = argparse.Namespace(episodes_command="tasks", setting="chess", json=False)
    assert await episodes.episodes_command(args, settings) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("openclaw-rl episodes: unknown setting 'chess'")


def test_every_command_with_a_temporal_client_leaves_without_interpreter_teardown():
    """The client's native threads can crash an interpreter that finishes after the work succeeded (a `deploy
    promote` that printed "is current" exited -6): such commands leave through cli.main._exit."""
    import argparse

    from cli.main import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    with_client = {"up", "worker", "users", "sessions", "turns", "train", "episodes", "eval", "deploy"}
    assert {name for name in with_client if not commands[name]._defaults.get("exits_hard")} == set()
