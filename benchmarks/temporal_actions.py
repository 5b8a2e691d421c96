"""Billable Temporal Cloud actions per unit of work, counted from workflow histories.

Temporal Cloud bills per action; what counts is listed at https://docs.temporal.io/cloud/actions ("Temporal Cloud
Actions": workflow started, by a client, continue-as-new or a child start; activity started, each retry included;
heartbeats; timers started; signals; queries; updates; search-attribute upserts; side-effect markers; ...). From a
history this counts:

    WorkflowExecutionStarted (every run: client start, continue-as-new, child)  1
    ActivityTaskScheduled, plus one per retry (ActivityTaskStarted.attempt - 1)  1 (+ retries)
    TimerStarted                                                                 1
    WorkflowExecutionSignaled, SignalExternalWorkflowExecutionInitiated          1
    WorkflowExecutionUpdateAccepted                                              1
    UpsertWorkflowSearchAttributes                                               1
    MarkerRecorded (side effects, local activities; patch markers shown apart)  1
    RequestCancelExternalWorkflowExecutionInitiated                              1

A child start is billed once, as the child's WorkflowExecutionStarted (the parent's Initiated event is not
counted again). Not in a history, so not counted: queries, activity heartbeats, rejected updates, schedule
actions. Patch markers (`workflow.patched`) are listed but left out of the totals: whether Cloud bills a version
marker is not said on that page.

The histories are the recorded ones (tests/fixtures/histories, written by `python -m
tests.workflows.record_histories`): the real workflow code on mock pools, a short run of each unit of work. They
change only when the workflows do, so the figures are today's code's.

    .venv/bin/python benchmarks/temporal_actions.py [--histories DIR]

Prints actions per judged chat turn, per episode step and per train step, with what each is made of.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from openclaw_rl.settings.serving import SessionSettings  # noqa: E402
from openclaw_rl.temporal_actions import actions, count, total, updates  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
HISTORIES = REPO / "tests" / "fixtures" / "histories"
TURNS_PER_RUN = SessionSettings().turns_per_run
"""The default turns a session's run takes before it continues as new."""


def load(name: str, root: Path) -> list[dict]:
    return json.loads((root / name).read_text())["events"]


def show(c: Counter, per: float) -> str:
    return ", ".join(f"{k} {v / per:.2f}" for k, v in sorted(c.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--histories", type=Path, default=HISTORIES)
    args = parser.parse_args(argv)
    root = args.histories

    # A judged chat turn: the session's share (runs 1-3 of a session that continued as new twice) plus one judge
    # child (binary RL: m PRM votes and publish_sample).
    runs = [load(f"session_paired_and_rolled_run{i}.json", root) for i in (1, 2, 3)]
    session = sum((actions(r) for r in runs), Counter())
    turns = sum(updates(r) for r in runs)
    judge = actions(load("judge_turn_now_binary.json", root))  # today's: votes and publish in one activity
    judge_deprecated = actions(load("judge_turn_retired_binary.json", root))  # the build before: two, and an upsert
    judge_before = actions(load("retired/judge_turn_binary.json", root))  # before VOTES_IN_ONE_ACTIVITY: one a vote
    combined = actions(load("judge_turn_now_in_one.json", root))  # 3 PRM votes and a hint vote, the hint accepted
    no_hint = actions(load("judge_turn_now_no_hint.json", root))  # the same, no hint accepted: one activity
    per_turn = total(session) / turns + total(judge)
    # The recording rolls a session over every 2 turns; a deployment every `session.turns_per_run` (200). What a
    # run costs once (its start, its idle timer, the archive, the roll-over signal, a version upsert) is then spread
    # over that many turns; what each turn costs (the update, the generation) is not.
    each_turn = {"update", "activity:generate"}
    turn_share = sum(v for k, v in session.items() if k in each_turn) / turns
    run_share = sum(v for k, v in session.items() if k not in each_turn and not k.startswith("patch")) / len(runs)
    in_production = turn_share + run_share / TURNS_PER_RUN + total(judge)
    before_production = turn_share + run_share / TURNS_PER_RUN + total(judge_deprecated)
    print(f"session: {turns} turns over {len(runs)} runs, {total(session)} actions ({total(session) / turns:.2f} a "
          f"turn): {show(session, turns)}")  # fmt: skip
    print(f"judge child (binary): {total(judge)} actions: {show(judge, 1)}")
    print(f"judge child (binary, the build before): {total(judge_deprecated)} actions: {show(judge_deprecated, 1)}")
    print(f"judge child (binary, one activity a vote, before): {total(judge_before)} actions: {show(judge_before, 1)}")
    print(f"judge child (combined, with a hint): {total(combined)} actions: {show(combined, 1)}")
    print(f"judge child (combined, no hint accepted): {total(no_hint)} actions: {show(no_hint, 1)}")

    # An episode step: the episode's actions over its steps (its start, open, finish, votes and upsert spread over
    # them), and the step's own (agent_step + env_step).
    ep = load("episode_steps_in_one.json", root)  # today's: outcome and close in one call, the votes in one
    episode = actions(ep)
    steps = count(ep, "env_step")
    marginal = sum(episode[f"activity:{a}"] for a in ("agent_step", "env_step", "step_vote")) / steps
    fixed = total(episode) - marginal * steps  # what an episode costs whatever its length
    episode_before = actions(load("episode_steps_now.json", root))  # a call each for outcome, close and every vote
    episode_older = actions(load("episode_steps.json", root))  # and an upsert for each attribute
    print(f"episode: {steps} steps, {total(episode)} actions: {show(episode, 1)}")
    print(f"episode (the build before): {total(episode_before)} actions: {show(episode_before, 1)}")
    print(f"episode (two builds before): {total(episode_older)} actions: {show(episode_older, 1)}")
    by_length = ", ".join(f"{n} steps {(marginal * n + fixed) / n:.2f}" for n in (3, 5, 10, 30))
    print(f"per episode step by episode length ({marginal:.0f} a step + {fixed:.0f} an episode): {by_length}")
    group = actions(load("task_group_published_now.json", root))
    group_before = actions(load("task_group_published.json", root))
    print(f"task group (2 episodes' parent): {total(group)} actions: {show(group, 1)}; the build before "
          f"{total(group_before)}")  # fmt: skip

    # A train step: the training workflow's actions over its steps (claim, train, ack, publish, checkpoint...).
    tr = load("training_steps.json", root)
    training = actions(tr)
    train_steps = count(tr, "train_step")
    print(f"training: {train_steps} steps, {total(training)} actions: {show(training, 1)}")

    print(
        f"judged turn with {TURNS_PER_RUN}-turn session runs: {in_production:.2f} (session {turn_share:.2f} a turn + "
        f"{run_share:.1f} a run / {TURNS_PER_RUN}, judge {total(judge)}); the build before: {before_production:.2f}"
    )
    base = in_production - total(judge)
    print(
        f"combined (the default method): {base + total(no_hint):.2f} a judged turn whose hint is not accepted, "
        f"{base + total(combined):.2f} with an accepted hint (its teacher pass on the policy pool, then the publish)"
    )
    print(
        f"actions: {per_turn:.1f} per judged turn (session {total(session) / turns:.2f} + judge {total(judge)}), "
        f"{total(episode) / steps:.1f} per episode step ({marginal:.0f} per step plus the start, open, finish, votes "
        f"and upsert, spread over {steps} steps; the build before {total(episode_before) / steps:.1f}), "
        f"{total(training) / max(train_steps, 1):.1f} per train step"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
