"""`openclaw-rl turns --export` and `openclaw-rl episodes export` in-process (fakes for Temporal and the store, the
records of tests/control/test_atif.py): our JSON at FILE, the ATIF trajectory beside it (valid against the published
schema), both mode 600; --format picks one."""

from __future__ import annotations

import argparse
import json
from types import SimpleNamespace

import pytest
from temporalio.client import WorkflowExecutionStatus

from cli import admin, episodes
from contracts.atif import Trajectory
from control.audit import TurnLog
from openclaw_rl.settings import Settings
from tests.control.test_atif import check, episode, session_log


class _Store:
    def __init__(self, toks=None, requests=None, ep=None):
        self.turns = SimpleNamespace(load=self._token)
        self.requests = SimpleNamespace(load_key=self._request)
        self.episodes = SimpleNamespace(advantages=self._adv, recorded=self._recorded)
        self._toks, self._requests, self._ep = toks or {}, requests or {}, ep

    async def _token(self, turn_id):
        if self._ep is not None:
            step = next(s for s in self._ep["steps"] if s.step_id == turn_id)
            return self._ep["tokens"][step.index]
        return self._toks.get(turn_id)

    async def _request(self, key):
        return self._requests.get(key.rsplit(":", 1)[-1])

    async def _adv(self, episode_id):
        return self._ep["advantages"]

    async def _recorded(self, attempt_key):
        return self._ep["opening"], self._ep["recorded"]

    async def aclose(self):
        pass

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        pass


async def test_turns_export_writes_our_json_and_atif_beside_it(tmp_path, monkeypatch, capsys):
    import control.audit

    log, requests, toks = session_log()

    async def session_turns(client, store, user, session_id, offset, limit):
        return log

    async def client(settings, what):
        return None

    monkeypatch.setattr(admin, "_client", client)
    monkeypatch.setattr(control.audit, "session_turns", session_turns)
    monkeypatch.setattr(admin.Store, "from_settings", staticmethod(lambda s: _Store(toks, requests)))
    out = tmp_path / "sess.json"
    args = argparse.Namespace(
        session_id="sess", user="u1", offset=0, limit=50, json=False, export=str(out), format="both"
    )
    assert await admin.turns_command(args, Settings(data_dir=tmp_path)) == 0
    assert TurnLog.model_validate_json(out.read_text()) == log
    doc = check(Trajectory.model_validate_json((tmp_path / "sess.atif.json").read_text()))
    assert doc["extra"]["user_id"] == "u1" and doc["steps"][2]["metrics"]["completion_token_ids"] == [6, 7, 8]
    assert out.stat().st_mode & 0o777 == 0o600 == (tmp_path / "sess.atif.json").stat().st_mode & 0o777
    assert "sess.atif.json" in capsys.readouterr().out
    only = tmp_path / "only.atif.json"
    args.export, args.format = str(only), "atif"
    assert await admin.turns_command(args, Settings(data_dir=tmp_path)) == 0
    check(Trajectory.model_validate_json(only.read_text()))
    assert not (tmp_path / "only.atif.atif.json").exists()


class _Handle:
    def __init__(self, result):
        self._result = result

    async def describe(self):
        return SimpleNamespace(status=WorkflowExecutionStatus.COMPLETED)

    async def result(self):
        return self._result


class _Client:
    def __init__(self, result):
        self._result = result

    def get_workflow_handle(self, workflow_id, **kw):
        return _Handle(self._result)


@pytest.mark.parametrize("fmt", ["both", "json", "atif"])
async def test_episodes_export_writes_our_json_and_atif_beside_it(tmp_path, monkeypatch, capsys, fmt):
    e = episode()
    monkeypatch.setattr(episodes.Store, "from_settings", staticmethod(lambda s: _Store(ep=e)))
    out = tmp_path / "ep.json"
    args = argparse.Namespace(
        episodes_command="export", episode_id=e["episode_id"], out=str(out), format=fmt, workflow_queue="q"
    )
    assert await episodes.episodes_command(args, Settings(data_dir=tmp_path), client=_Client(e["result"])) == 0
    atif = tmp_path / "ep.atif.json"
    if fmt == "both":
        ours = json.loads(out.read_text())
        assert ours["episode_id"] == e["episode_id"] and ours["outcome"] == 1.0 and ours["advantages"]["0"]
        doc = check(Trajectory.model_validate_json(atif.read_text()))
        assert doc["steps"][2]["metrics"]["logprobs"] == [-0.25, -0.5, -0.75]
    elif fmt == "json":
        assert json.loads(out.read_text())["status"] == "completed" and not atif.exists()
    else:
        check(Trajectory.model_validate_json(out.read_text()))
        assert not atif.exists()
