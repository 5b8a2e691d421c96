"""What a training run's episodes say about its rewards: step votes against the checker, advantages, samples.

Read after the rollout stops, from the finished EpisodeWorkflows' results (every step's PRM votes, the episode's
outcome, the policy version that wrote each step). The (group, step) advantages are recomputed with the workflow's
own function (`rlmath.stepwise`), so steps in constant buckets (dropped: no signal) are counted too.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter, defaultdict

from contracts.episodes import EpisodeResult, episode_workflow_id
from rlmath.stepwise import group_advantages, step_reward


async def step_metrics(client, settings, seen: dict[int, dict]) -> None:
    """Add the training workflow's latest step metrics (loss, KL, entropy, clip fraction...) to `seen`, by step."""
    from contracts.training import training_workflow_id
    from workflows.training import TrainingWorkflow

    status = await client.get_workflow_handle(training_workflow_id(settings.api.model_name)).query(
        TrainingWorkflow.status
    )
    if status.last_metrics is not None:
        seen.setdefault(status.last_metrics.step, status.last_metrics.model_dump() | {"version": status.version})


async def finished_episodes(
    client, rollout_id: str, groups: int, samples: int, errors: Counter | None = None
) -> dict[str, list[EpisodeResult]]:
    """group id -> the results of its episodes that finished (terminated or failed ones are left out, counted in
    `errors` by why)."""

    async def one(group_id: str, k: int) -> tuple[str, EpisodeResult | None]:
        from workflows.episode import EpisodeWorkflow

        handle = client.get_workflow_handle_for(EpisodeWorkflow.run, episode_workflow_id(group_id, k))
        try:
            return group_id, await handle.result()
        except Exception as exc:  # noqa: BLE001 - terminated with the rollout, failed, or never started
            if errors is not None:
                errors[f"{type(exc).__name__}: {str(exc)[:120]}"] += 1
            return group_id, None

    ids = [f"{rollout_id}.g{i}" for i in range(groups)]
    results = await asyncio.gather(*(one(g, k) for g in ids for k in range(samples)))
    out: dict[str, list[EpisodeResult]] = defaultdict(list)
    for group_id, r in results:
        if r is not None:
            out[group_id].append(r)
    return dict(out)


async def group_episodes(client, group_id: str, samples: int) -> list[EpisodeResult]:
    """The finished episodes of one task group."""
    from workflows.episode import EpisodeWorkflow

    out = []
    for k in range(samples):
        handle = client.get_workflow_handle_for(EpisodeWorkflow.run, episode_workflow_id(group_id, k))
        try:
            out.append(await handle.result())
        except Exception:  # noqa: BLE001 - failed after its attempts: the group left it out too
            continue
    return out


_TOOL_ERROR = re.compile(r"error|traceback|exit code [1-9]|No such file", re.IGNORECASE)
BEHAVIOURS = ("success", "no_tool_call", "malformed_call", "tool_error", "other_failure")


def behaviour(e: EpisodeResult) -> str:
    """What an episode did, from its steps: succeeded; answered without ever calling a tool; sent a call that
    could not be parsed; ran a tool that failed; or failed otherwise (a wrong copy, an answer not written...)."""
    if e.outcome >= 0.5:
        return "success"
    if any(s.parse_error for s in e.steps):
        return "malformed_call"
    if not any(s.tool_calls for s in e.steps):
        return "no_tool_call"
    if any(s.tool_calls and _TOOL_ERROR.search(s.observation) for s in e.steps):
        return "tool_error"
    return "other_failure"


def behaviour_rates(episodes: list[EpisodeResult]) -> dict[str, float]:
    counts = Counter(behaviour(e) for e in episodes)
    return {b: round(counts[b] / len(episodes), 4) for b in BEHAVIOURS} if episodes else {}


def reward_stats(groups: dict[str, list[EpisodeResult]], samples: int, integrated: bool) -> dict:
    """Vote accuracy against the outcome, what the advantages looked like, and how many samples each step gave
    (groups whose `samples` episodes all finished: those the workflow standardised and published)."""
    groups = {g: eps for g, eps in groups.items() if len(eps) == samples}
    votes = Counter()
    by_step: dict[int, Counter] = defaultdict(Counter)
    outcomes: list[float] = []
    kept = dropped = 0
    samples_by_step: Counter = Counter()
    magnitudes: list[float] = []
    signs = Counter()
    for episodes in groups.values():
        complete = [e for e in episodes if e.steps]
        rewards = []
        for e in complete:
            outcomes.append(e.outcome)
            success = e.outcome >= 0.5
            row = []
            for s in e.steps:
                valid = [v for v in s.votes if v in (1, -1)]
                for v in valid:
                    agree = (v > 0) == success
                    votes["agree" if agree else "disagree"] += 1
                    votes[f"{'+1' if v > 0 else '-1'} on {'success' if success else 'failure'}"] += 1
                    by_step[s.index]["agree" if agree else "disagree"] += 1
                row.append(step_reward(e.outcome, s.votes if integrated else []))
            rewards.append(row)
        advantages = group_advantages(rewards)
        total = sum(len(r) for r in rewards)
        kept += len(advantages)
        dropped += total - len(advantages)
        for a in advantages:
            samples_by_step[a.step] += 1
            magnitudes.append(abs(a.advantage))
            signs["positive" if a.advantage > 0 else "negative" if a.advantage < 0 else "zero"] += 1
    judged = votes["agree"] + votes["disagree"]
    return {
        "groups": len(groups),
        "episodes": len(outcomes),
        "mean_outcome": round(sum(outcomes) / len(outcomes), 4) if outcomes else None,
        "groups_with_mixed_outcomes": sum(
            1 for eps in groups.values() if len({e.outcome >= 0.5 for e in eps if e.steps}) > 1
        ),
        "vote_accuracy": round(votes["agree"] / judged, 4) if judged else None,
        "votes": dict(votes),
        "vote_accuracy_by_step": {
            str(t): round(c["agree"] / (c["agree"] + c["disagree"]), 3) for t, c in sorted(by_step.items())
        },
        "steps_with_signal": kept,
        "steps_dropped_constant": dropped,
        "samples_by_step": {str(t): n for t, n in sorted(samples_by_step.items())},
        "mean_abs_advantage": round(sum(magnitudes) / len(magnitudes), 4) if magnitudes else None,
        "advantage_signs": dict(signs),
    }
