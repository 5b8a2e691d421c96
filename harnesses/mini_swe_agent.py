"""mini-swe-agent's own agent loop on an episode of this system, its commands run in the task's sandbox.

mini-swe-agent (PyPI `mini-swe-agent`, 2.4) takes a model and an environment. Its model (litellm) is pointed at
the episode's OpenAI-compatible base URL, so every model call is a step of the episode; `EpisodeEnvironment` is
the environment: each command goes to the episode's `exec` route and runs in the task's workspace with the
sandbox's limits. Nothing in mini-swe-agent is changed: this is its documented extension point (any object with
`execute`, `get_template_vars` and `serialize`). The task's checker gives the outcome when the agent submits.

    python -m harnesses.mini_swe_agent --api http://127.0.0.1:8000 --key $KEY --setting swe --task TASK_ID
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import httpx

from envs.swe.protocol import SUBMIT_MARKER  # mini-swe-agent's end of task (its first output line)

OFFLINE = {
    "MSWEA_SILENT_STARTUP": "1",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # litellm otherwise fetches its cost map from GitHub at import
    "MSWEA_COST_TRACKING": "ignore_errors",  # our policy has no price: cost 0, the step limit bounds the run
}


class EpisodeEnvironment:
    """A mini-swe-agent environment whose commands run in an episode's task sandbox (`POST .../exec`)."""

    def __init__(self, api: str, key: str, episode_id: str, timeout_s: float = 900.0):
        self.episode_id = episode_id
        self.commands: list[str] = []
        self._http = httpx.Client(base_url=api, headers={"Authorization": f"Bearer {key}"}, timeout=timeout_s)

    def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        from minisweagent.exceptions import Submitted

        command = action.get("command", "")
        self.commands.append(command)
        r = self._http.post(f"/v1/episodes/{self.episode_id}/exec", json={"command": command})
        if r.status_code != 200:  # the episode refused it (ended, abandoned): the agent reads why
            reason = r.json().get("error", {}).get("message", r.text) if r.content else r.reason_phrase
            return {"output": "", "returncode": -1, "exception_info": f"the episode refused the command: {reason}"}
        body = r.json()
        out = {"output": body["output"], "returncode": body["returncode"], "exception_info": ""}
        lines = out["output"].lstrip().splitlines(keepends=True)
        if lines and lines[0].strip() == SUBMIT_MARKER and out["returncode"] == 0:
            submission = "".join(lines[1:])
            raise Submitted(
                {"role": "exit", "content": submission, "extra": {"exit_status": "Submitted", "submission": submission}}
            )
        return out

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        # mini-swe-agent's templates name the machine (platform.uname() locally): the sandbox's.
        return {"system": "Linux", "release": "", "version": "", "machine": os.uname().machine, **kwargs}

    def serialize(self) -> dict:
        return {"info": {"config": {"environment": {"episode": self.episode_id}, "environment_type": __name__}}}

    def close(self) -> None:
        self._http.close()


def run_episode(
    api: str, key: str, setting: str, task_id: str, *, step_limit: int = 20, config: str = "mini.yaml"
) -> dict[str, Any]:
    """Open an episode of the task, run mini-swe-agent's DefaultAgent on it, end it: its exit status, the
    commands it ran, and the checker's outcome."""
    for k, v in OFFLINE.items():
        os.environ.setdefault(k, v)
    try:
        from minisweagent.agents.default import DefaultAgent
        from minisweagent.config import get_config_from_spec
    except ImportError as exc:
        raise ImportError(
            f"this harness needs mini-swe-agent: pip install 'openclaw-rl[mini-swe-agent]' ({exc})"
        ) from exc

    auth = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=api, headers=auth, timeout=900) as http:
        r = http.post("/v1/episodes", json={"setting": setting, "task_id": task_id})
        r.raise_for_status()
        ep = r.json()["episodes"][0]
        task = http.get(f"/v1/episodes/{ep['id']}").json()
        if "messages" not in task:
            raise RuntimeError(f"episode {ep['id']} did not open: {task.get('failed') or task}")
        instruction = next(m["content"] for m in task["messages"] if m["role"] == "user")
        cfg = get_config_from_spec(config)
        agent_cfg = {k: v for k, v in cfg["agent"].items() if k not in ("mode", "confirm_exit")}
        agent_cfg |= {"step_limit": step_limit, "cost_limit": 0}
        model = _model(config, cfg, ep["base_url"], key)
        env = EpisodeEnvironment(api, key, ep["id"])
        try:
            result = DefaultAgent(model, env, **agent_cfg).run(instruction)
        finally:
            env.close()
        end = http.post(f"/v1/episodes/{ep['id']}/outcome", json={})
        end.raise_for_status()
    return {"episode": ep["id"], "exit_status": result.get("exit_status"), "commands": env.commands, **end.json()}


def _model(config: str, cfg: dict, base_url: str, key: str):
    """mini-swe-agent's litellm model of the config (tool calls for mini.yaml, text blocks for the text-based
    ones), pointed at the episode."""
    if "textbased" in config:
        from minisweagent.models.litellm_textbased_model import LitellmTextbasedModel as Model
    else:
        from minisweagent.models.litellm_model import LitellmModel as Model
    kwargs = {**cfg.get("model", {}).get("model_kwargs", {}), "api_base": base_url, "api_key": key}
    return Model(
        **{
            **cfg.get("model", {}),
            "model_name": "openai/policy",
            "model_kwargs": kwargs,
            "cost_tracking": "ignore_errors",
        }
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--api", required=True, help="the API's base URL")
    p.add_argument("--key", required=True, help="an API key (openclaw-rl keys create --user NAME)")
    p.add_argument("--setting", default="swe")
    p.add_argument("--task", required=True, help="a task id (openclaw-rl episodes tasks --setting SETTING)")
    p.add_argument("--step-limit", type=int, default=20)
    p.add_argument("--config", default="mini.yaml", help="mini-swe-agent's config (mini.yaml, mini_textbased.yaml)")
    a = p.parse_args()
    print(json.dumps(run_episode(a.api, a.key, a.setting, a.task, step_limit=a.step_limit, config=a.config), indent=1))


if __name__ == "__main__":
    main()
