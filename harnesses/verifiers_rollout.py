"""A `verifiers` environment's own rollout loop on client-driven episodes of this system.

verifiers (PyPI `verifiers`, its classic API: 0.1.14) runs one rollout as `env.run_rollout(row, client, model,
sampling_args)`: its rollout loop asks its client for each model turn, runs `env_response` (a ToolEnv's tools run
here, in this process), stops on its own conditions (`max_turns`, an answer without tool calls, ...) and scores
the rollout with its rubric. Nothing of it is changed here: its client is verifiers' own
`vf.OpenAIChatCompletionsClient` over an `AsyncOpenAI` whose `base_url` is a free-form episode's, so every model
call of the rollout is a step of the episode, and the rubric's reward is posted as the episode's outcome.

Each dataset row is one group of `rollouts_per_example` episodes (standardised together when the last one ends);
their samples go to the stream `label`. A rollout that failed (its model call refused, an environment error) posts
no outcome: its episode trains nothing (it is abandoned after `envs.client.idle_timeout_s`).

    python -m harnesses.verifiers_rollout --api http://127.0.0.1:8000 --key $KEY --env vf_arith \\
        --args '{"kind": "tools"}' -n 3 -r 2 --label arith
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import httpx

OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
"""verifiers builds its datasets with `datasets`: environments whose data is local need no network."""


async def run_rollouts(
    api: str,
    key: str,
    environment: str,
    args: dict[str, Any] | None = None,
    *,
    num_examples: int = -1,
    rollouts_per_example: int = 1,
    label: str = "verifiers",
    model: str = "policy",
    sampling_args: dict[str, Any] | None = None,
    env: Any = None,
) -> list[dict[str, Any]]:
    """Rollouts of the environment's eval rows (the first `num_examples`; -1: all), one episode each.

    `env` is an environment already loaded (`vf.load_environment(environment, **args)` otherwise). Returns one
    dict per rollout: the episode, verifiers' reward, metrics and stop condition, the outcome the episode took,
    and the rollout's error (if any)."""
    try:
        import verifiers as vf
        from openai import AsyncOpenAI
    except ImportError as exc:
        raise ImportError(f"this harness needs verifiers: pip install 'openclaw-rl[verifiers]' ({exc})") from exc

    env = env if env is not None else vf.load_environment(environment, **(args or {}))
    rows = env.get_eval_dataset(n=num_examples).to_list()
    auth = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=api, headers=auth, timeout=600) as http:

        async def one(row: dict[str, Any], group_id: str, episode: dict[str, Any]) -> dict[str, Any]:
            llm = AsyncOpenAI(base_url=episode["base_url"], api_key=key, max_retries=0)
            try:
                client = vf.OpenAIChatCompletionsClient(llm)
                out = await env.run_rollout(dict(row), client, model, dict(sampling_args or {}))
            finally:
                await llm.close()
            result = {
                "episode": episode["id"],
                "workflow_id": episode["workflow_id"],
                "group": group_id,
                "example_id": row.get("example_id"),
                "reward": float(out["reward"]),
                "metrics": dict(out.get("metrics") or {}),
                "stop_condition": out.get("stop_condition"),
                "error": str(out["error"]["error"]) if out.get("error") else None,
                "outcome": None,
            }
            if result["error"] is None:
                r = await http.post(f"/v1/episodes/{episode['id']}/outcome", json={"outcome": result["reward"]})
                r.raise_for_status()
                result["outcome"] = r.json()["outcome"]
            return result

        async def group(row: dict[str, Any]) -> list[dict[str, Any]]:
            r = await http.post("/v1/episodes", json={"samples": rollouts_per_example, "label": label})
            r.raise_for_status()
            opened = r.json()
            return list(await asyncio.gather(*(one(row, opened["group_id"], ep) for ep in opened["episodes"])))

        groups = await asyncio.gather(*(group(row) for row in rows))
    return [r for g in groups for r in g]


def main(argv: list[str] | None = None) -> None:
    import os

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--api", default="http://127.0.0.1:8000")
    p.add_argument("--key", required=True)
    p.add_argument("--env", required=True, help="the verifiers environment's id (the module with load_environment)")
    p.add_argument("--args", default="{}", help="its load_environment() keyword arguments, as JSON")
    p.add_argument("-n", "--num-examples", type=int, default=-1)
    p.add_argument("-r", "--rollouts-per-example", type=int, default=1)
    p.add_argument("--label", default="verifiers", help="the free-form episodes' sample stream")
    p.add_argument("--sampling-args", default="{}", help="as JSON, e.g. '{\"max_tokens\": 512}'")
    a = p.parse_args(argv)
    for k, v in OFFLINE.items():
        os.environ.setdefault(k, v)
    results = asyncio.run(
        run_rollouts(
            a.api,
            a.key,
            a.env,
            json.loads(a.args),
            num_examples=a.num_examples,
            rollouts_per_example=a.rollouts_per_example,
            label=a.label,
            sampling_args=json.loads(a.sampling_args),
        )
    )
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
