"""`openclaw-rl episodes`: start, list, inspect, retry and watch general-agent episodes.

Episodes, groups and rollouts are Temporal workflows; this is a terminal view
of them (the Web UI shows the same, filtered by the OpenclawSetting,
OpenclawTask and OpenclawOutcome search attributes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from contracts.episodes import (
    EPISODE_WORKFLOW,
    ROLLOUT_WORKFLOW,
    EpisodeInput,
    EpisodeResult,
)
from control import episodes
from envs.registry import SOURCES, available
from openclaw_rl import console as style
from openclaw_rl.masking import mask_url
from openclaw_rl.search_attributes import OUTCOME, SETTING, TASK_ID
from openclaw_rl.settings import Pool, Settings
from rlmath.stepwise import step_reward
from store import keys
from store.client import Store

STATUSES = {
    "running": "Running",
    "completed": "Completed",
    "failed": "Failed",
    "timed_out": "TimedOut",
    "terminated": "Terminated",
    "canceled": "Canceled",
}
FAILED = ("Failed", "TimedOut", "Terminated", "Canceled")
SETTINGS = list(SOURCES)
"""The built-in settings (plugins add theirs: `--setting` is checked against `envs.registry.available`)."""
_SINCE = re.compile(r"^(\d+)([smhd])$")
_MIX = re.compile(r"^(?P<setting>[a-z][a-z0-9_]*)(?::(?P<tasks>[^@]*))?(?:@(?P<samples>[^@]*))?$")
MIX_SYNTAX = "SETTING[:TASK,TASK...][@SAMPLES], e.g. terminal:files-dedupe,text-top-ips swe toolcall:math/0@4"


def parse_mix(values: list[str], known: list[str] = SETTINGS) -> list[tuple[str, list[str], int | None]]:
    """`--mix` parts: (setting, task ids (empty: every task of the setting), episodes per task or None)."""
    parts = []
    for value in values:
        m = _MIX.match(value.strip())
        if not m:
            raise ValueError(f"--mix {value!r}: expected {MIX_SYNTAX}")
        setting, tasks, samples = m["setting"], m["tasks"], m["samples"]
        if setting not in known:
            raise ValueError(f"--mix {value!r}: unknown setting {setting!r} (one of {', '.join(known)})")
        ids = [] if tasks is None else [t.strip() for t in tasks.split(",")]
        if tasks is not None and not all(ids):
            raise ValueError(f"--mix {value!r}: an empty task id (task ids are separated by commas, no spaces)")
        n = None
        if samples is not None:
            if not samples.isdigit() or not 1 <= int(samples) <= 64:
                raise ValueError(f"--mix {value!r}: @SAMPLES must be a number of episodes per task, 1 to 64")
            n = int(samples)
        parts.append((setting, ids, n))
    if not parts:
        raise ValueError(f"--mix needs at least one part: {MIX_SYNTAX}")
    return parts


def check_setting(args: argparse.Namespace, known: list[str]) -> None:
    """`--setting` names a built-in setting or a plugin's (checked before Temporal is reached)."""
    setting = getattr(args, "setting", None)
    if setting and setting not in known:
        raise ValueError(f"unknown setting {setting!r}: one of {', '.join(known)}")


def check_rollout_args(args: argparse.Namespace, known: list[str] = SETTINGS) -> None:
    """`episodes rollout`: exactly one of --setting and --mix (checked before Temporal is reached)."""
    mix = getattr(args, "mix", None)
    if mix is None and not getattr(args, "setting", None):
        raise ValueError("episodes rollout needs --setting SETTING, or --mix " + MIX_SYNTAX)
    if mix is not None:
        if getattr(args, "setting", None):
            raise ValueError("--mix names each part's setting: give --setting or --mix, not both")
        if args.tasks:
            raise ValueError("--mix names each part's tasks (SETTING:TASK,TASK): --tasks is for --setting")
        args.mix_parts = parse_mix(mix, known)


def visibility_query(args: argparse.Namespace, workflow_type: str = EPISODE_WORKFLOW) -> str:
    """The list filter in Temporal's visibility syntax (the same query works in the Web UI and `temporal`)."""
    parts = [f"WorkflowType = '{workflow_type}'"]
    if getattr(args, "setting", None):
        parts.append(f"{SETTING.name} = '{args.setting}'")
    if getattr(args, "task", None):
        parts.append(f"{TASK_ID.name} = '{_quote(args.task)}'")
    status = getattr(args, "status", None)
    if status:
        parts.append(f"ExecutionStatus = '{STATUSES[status]}'")
    else:
        parts.append("ExecutionStatus != 'ContinuedAsNew'")
    if getattr(args, "since", None):
        parts.append(f"StartTime > '{parse_since(args.since).isoformat()}'")
    return " AND ".join(parts)


def parse_since(value: str) -> datetime:
    """`30m`, `2h`, `1d`, or an ISO date/time (UTC when it has no zone)."""
    if m := _SINCE.match(value.strip()):
        n, unit = int(m.group(1)), m.group(2)
        return datetime.now(timezone.utc) - timedelta(
            **{{"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[unit]: n}
        )
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"--since {value!r}: use 30m, 2h, 1d or an ISO date such as 2026-11-22T10:00") from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")


_DEFAULTS = {"setting": None, "task": None, "status": None, "since": None, "limit": 50, "json": False}


async def episodes_command(args: argparse.Namespace, settings: Settings, client: Client | None = None) -> int:
    for name, value in _DEFAULTS.items():  # filters may come before or after the subcommand
        if not hasattr(args, name):
            setattr(args, name, value)
    if not hasattr(args, "workflow_queue"):
        args.workflow_queue = settings.temporal.task_queue(Pool.WORKFLOW)
    sub = args.episodes_command or "list"
    try:
        known = available(settings)
        if sub in ("tasks", "start", "run", "group", "rollout"):  # filters may name a setting no longer installed
            check_setting(args, known)
        if sub == "tasks":
            return list_tasks(args, settings)
        if sub == "rollout":
            check_rollout_args(args, known)
        client = client or await _connect(settings)
        if sub == "list":
            return await list_episodes(client, args)
        if sub == "show":
            return await show_episode(client, settings, args)
        if sub == "export":
            return await export_episode(client, settings, args)
        if sub == "retry":
            return await retry_episodes(client, settings, args)
        if sub == "watch":
            return await watch(client, args)
        if sub in ("start", "run", "group", "rollout"):
            return await start(client, settings, args)
    except ValueError as exc:
        style.error("episodes", str(exc))
        return 2
    except RPCError as exc:
        style.error("episodes", f"Temporal refused: {exc.message}")
        return 1
    raise AssertionError(sub)


async def _connect(settings: Settings) -> Client:
    from openclaw_rl.temporal_client import connect

    try:
        return await connect(settings.temporal, keyring=settings.keyring())
    except RuntimeError as exc:
        style.error(
            "episodes",
            f"cannot reach Temporal at {mask_url(settings.temporal.target())}: {exc}. "
            "Is the stack up (`openclaw-rl up`)?",
        )
        raise SystemExit(1) from None  # as the SystemExit(message) this was: stderr, exit 1


def list_tasks(args: argparse.Namespace, settings: Settings) -> int:
    """Every setting's tasks; a plugin that cannot load is reported and the others are listed (exit 1)."""
    from envs.registry import PluginError, task_source

    rows, broken = [], []
    for setting in [args.setting] if args.setting else available(settings):
        try:
            rows += task_source(setting, settings).tasks()
        except PluginError as exc:
            broken.append(str(exc))
    if args.json:
        print(json.dumps([r.model_dump() for r in rows], indent=2))
    else:
        style.table(
            ["SETTING", "TASK", "CATEGORY", "TITLE"],
            [[r.setting, r.task_id[:34], r.category[:12], r.title[:70]] for r in rows],
        )
        style.note(f"{len(rows)} tasks")
    for why in broken:
        style.error("episodes", why)
    return 1 if broken else 0


async def list_episodes(client: Client, args: argparse.Namespace) -> int:
    rows = []
    async for wf in client.list_workflows(visibility_query(args), limit=args.limit):
        attrs = wf.typed_search_attributes
        row = {
            "id": wf.id,
            "status": wf.status.name.lower() if wf.status else "unknown",
            "setting": attrs.get(SETTING) or "",
            "task": attrs.get(TASK_ID) or "",
            "outcome": attrs.get(OUTCOME),
            "started": wf.start_time.isoformat() if wf.start_time else None,
            "steps": None,
            "reward": None,
        }
        if wf.status == WorkflowExecutionStatus.COMPLETED:
            result = await _result(client, wf.id)
            if result is not None:
                row["steps"] = len(result.steps)
                rewards = [step_reward(result.outcome, s.votes) for s in result.steps]
                row["reward"] = sum(rewards) / len(rewards) if rewards else result.outcome
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    style.table(
        ["EPISODE", "STATUS", "SETTING", "TASK", "STEPS", "OUTCOME", "REWARD"],
        [
            [
                r["id"][:46],
                r["status"],
                r["setting"],
                r["task"][:26],
                r["steps"],
                None if r["outcome"] is None else f"{r['outcome']:.2f}",
                None if r["reward"] is None else f"{r['reward']:+.2f}",
            ]
            for r in rows
        ],
        right={"STEPS", "OUTCOME", "REWARD"},
    )
    return 0


async def _result(client: Client, workflow_id: str) -> EpisodeResult | None:
    try:
        return await client.get_workflow_handle(workflow_id, result_type=EpisodeResult).result()
    except Exception:  # an episode that did not complete has no result to show
        return None


class _Episode:
    """What `show` and `export` read of one episode: its status, and its steps from its result (finished) or its
    progress (running); `steps` None when it ended without a result (failed)."""

    def __init__(self, status: str, attempt: int, steps, outcome: float | None, result: EpisodeResult | None):
        self.status, self.attempt, self.steps, self.outcome, self.result = status, attempt, steps, outcome, result


async def _read_episode(client: Client, episode_id: str) -> _Episode | None:
    """None: no such episode."""
    handle = client.get_workflow_handle(episode_id)
    try:
        desc = await handle.describe()
    except RPCError:
        return None
    status = desc.status.name.lower() if desc.status else "unknown"
    result = await _result(client, episode_id) if desc.status == WorkflowExecutionStatus.COMPLETED else None
    if result is None and desc.status == WorkflowExecutionStatus.RUNNING:
        from workflows.episode import EpisodeWorkflow

        progress = await handle.query(EpisodeWorkflow.progress)
        return _Episode(status, progress.attempt, progress.steps, progress.outcome, None)
    if result is not None:
        return _Episode(status, result.attempt, result.steps, result.outcome, result)
    return _Episode(status, 0, None, None, None)


async def show_episode(client: Client, settings: Settings, args: argparse.Namespace) -> int:
    ep = await _read_episode(client, args.episode_id)
    if ep is None:
        style.error("episodes", f"no episode {args.episode_id!r} (see `openclaw-rl episodes`)")
        return 1
    status, result, steps, outcome, attempt = ep.status, ep.result, ep.steps, ep.outcome, ep.attempt
    if steps is None:
        inp = await original_input(client, args.episode_id)
        print(f"episode {args.episode_id}: {status} ({inp.setting} {inp.task_id}); see the Web UI for its failure")
        return 0
    async with Store.from_settings(settings) as store:
        adv = await store.episodes.advantages(args.episode_id)
        key = result.attempt_key if result is not None else keys.episode_attempt(args.episode_id, attempt)
        observed = await store.episodes.observations(key, [s.index for s in steps])
    # gui steps' screenshot files (gone from here once the episode's data expires)
    shots = {i: o.screenshot for i, o in observed.items() if o.screenshot}
    if args.json:
        print(json.dumps(_episode_json(args.episode_id, ep, adv, shots), indent=2))
        return 0
    head = f"episode {args.episode_id}: {status}, attempt {attempt}"
    if result is not None:
        head += f", {result.setting} {result.task_id}, ended: {result.end}, outcome {result.outcome:g}"
    print(head)
    if shots:
        first = Path(next(iter(shots.values()))).with_name("reset.png")  # envs.gui.env.OPENING_SCREENSHOT
        print(f"screenshots: {first.parent}/ (opening: {first.name})")
    for s in steps:
        votes = ", ".join("-" if v is None else f"{v:+d}" for v in s.votes) or "none"
        reward = f"{step_reward(outcome, s.votes):+.2f}" if outcome is not None else "-"
        a = f", advantage {adv[s.index][1]:+.3f}" if s.index in adv else ""
        print(f"\n#{s.index} policy v{s.weight_version or '?'} {s.prompt_tokens}+{s.completion_tokens} tokens")
        print(f"  action:      {_one_line(s.action)}" + (f"  [parse error: {s.parse_error}]" if s.parse_error else ""))
        print(f"  observation: {_one_line(s.observation)}")
        print(f"  votes [{votes}], step reward {reward}{a}" + (f"; ended: {s.done_reason}" if s.done_reason else ""))
        if s.index in shots:
            print(f"  screenshot:  {shots[s.index]}")
    return 0


def _episode_json(episode_id: str, ep: _Episode, adv: dict, shots: dict) -> dict:
    """Our JSON of an episode (`episodes show --json`, `episodes export`)."""
    return {
        "episode_id": episode_id,
        "status": ep.status,
        "attempt": ep.attempt,
        "outcome": ep.outcome,
        "result": ep.result.model_dump() if ep.result else None,
        "advantages": {i: {"reward": r, "advantage": a} for i, (r, a) in adv.items()},
        "screenshots": shots,
    }


async def export_episode(client: Client, settings: Settings, args: argparse.Namespace) -> int:
    """Our JSON of the episode (`show --json`) and, beside it, its ATIF trajectory (control/atif.py); --format picks
    one of them."""
    from control.atif import atif_path, episode_trajectory, write_private, write_trajectory

    ep = await _read_episode(client, args.episode_id)
    if ep is None:
        style.error("episodes", f"no episode {args.episode_id!r} (see `openclaw-rl episodes`)")
        return 1
    if ep.steps is None:
        style.error("episodes", f"episode {args.episode_id}: {ep.status} without a result, nothing to export")
        return 1
    path = Path(args.out or re.sub(r"[^A-Za-z0-9._-]+", "_", args.episode_id) + ".json")
    async with Store.from_settings(settings) as store:
        adv = await store.episodes.advantages(args.episode_id)
        key = ep.result.attempt_key if ep.result is not None else keys.episode_attempt(args.episode_id, ep.attempt)
        opening, recorded = await store.episodes.recorded(key)
        tokens = {s.index: await store.turns.load(s.step_id) for s in ep.steps}
    written = []
    if args.format in ("both", "json"):
        shots = {i: o.observation.screenshot for i, (_, o) in recorded.items() if o and o.observation.screenshot}
        write_private(path, json.dumps(_episode_json(args.episode_id, ep, adv, shots), indent=2) + "\n")
        written.append(str(path))
    if args.format in ("both", "atif"):
        if not ep.steps and opening is None:
            style.error("episodes", f"episode {args.episode_id}: no steps, and its data is gone: no ATIF to write")
            return 1
        trajectory = episode_trajectory(
            args.episode_id,
            status=ep.status,
            attempt=ep.attempt,
            steps=ep.steps,
            outcome=ep.outcome,
            tokens=tokens,
            opening=opening,
            recorded=recorded,
            advantages=adv,
            result=ep.result,
        )
        where = atif_path(path) if args.format == "both" else path
        write_trajectory(trajectory, where)
        written.append(str(where))
    print(f"episode {args.episode_id} ({ep.status}, {len(ep.steps)} steps): " + ", ".join(written))
    return 0


def _one_line(text: str, n: int = 110) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


async def original_input(client: Client, workflow_id: str, run_id: str | None = None) -> EpisodeInput:
    """The input the episode was started with, from the first event of its history."""
    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    [value] = await client.data_converter.decode(started.input.payloads, [EpisodeInput])
    return value


async def retry_episodes(client: Client, settings: Settings, args: argparse.Namespace) -> int:
    """Start failed episodes again with their original input; each retry names the run it retries."""
    query = visibility_query(args)
    if not args.status:
        query = query.replace(
            "ExecutionStatus != 'ContinuedAsNew'", "(" + " OR ".join(f"ExecutionStatus = '{s}'" for s in FAILED) + ")"
        )
    started = 0
    async for wf in client.list_workflows(query, limit=args.limit):
        inp = await original_input(client, wf.id, wf.run_id)
        inp.retry_of = wf.id
        new_id = f"{wf.id}/retry-{uuid.uuid4().hex[:6]}"
        if args.dry_run:
            print(f"would retry {wf.id} ({wf.status.name.lower()}) as {new_id}")
            continue
        await episodes.start_episode(
            client,
            settings,
            inp,
            workflow_id=new_id,
            task_queue=args.workflow_queue,
            memo={"retry_of": wf.id, "retry_of_run": wf.run_id},
            static_summary=f"retry of {wf.id}",
        )
        started += 1
        print(f"retrying {wf.id} ({wf.status.name.lower()}) as {new_id}")
    if not started and not args.dry_run:
        print("no failed episodes match")
    return 0


async def start(client: Client, settings: Settings, args: argparse.Namespace) -> int:
    if getattr(args, "seed", None) is not None:
        if args.setting != "gui":
            raise ValueError("--seed is the task's own seed: gui tasks only")
        args.task = f"{args.task}/{args.seed}"  # envs.gui.task: an id names the task and its seed
    publish = not getattr(args, "no_publish", False)
    if getattr(args, "mix_parts", None):
        handle = await episodes.start_mixed_rollout(
            client,
            settings,
            args.mix_parts,
            samples_per_task=args.samples,
            parallel=args.parallel,
            passes=args.passes,
            publish=publish,
        )
    elif args.episodes_command in ("start", "run"):
        cfg = episodes.episode_config(settings, args.setting)
        handle = await episodes.start_episode(
            client, settings, EpisodeInput(setting=args.setting, task_id=args.task, config=cfg)
        )
    elif args.episodes_command == "group":
        handle = await episodes.start_task_group(
            client, settings, args.setting, args.task, samples=args.samples, publish=publish
        )
    else:
        handle = await episodes.start_rollout(
            client,
            settings,
            args.setting,
            args.tasks or [],
            samples_per_task=args.samples,
            parallel=args.parallel,
            passes=args.passes,
            publish=publish,
        )
    parts = f" ({'+'.join(dict.fromkeys(s for s, _, _ in args.mix_parts))})" if getattr(args, "mix_parts", None) else ""
    style.success(f"started {handle.id}{parts}")
    if getattr(args, "wait", False) or args.episodes_command == "run":  # `run`: start and wait
        result = await handle.result()
        print(result.model_dump_json(indent=2))
    return 0


async def watch(client: Client, args: argparse.Namespace) -> int:
    """A live progress line per running rollout (or the one named)."""
    from workflows.rollout import RolloutWorkflow

    tty = sys.stdout.isatty()
    last = ""
    try:
        while True:
            ids = (
                [args.rollout_id]
                if args.rollout_id
                else [
                    wf.id
                    async for wf in client.list_workflows(
                        f"WorkflowType = '{ROLLOUT_WORKFLOW}' AND ExecutionStatus = 'Running'", limit=20
                    )
                ]
            )
            lines = []
            finished = True
            for wf_id in ids:
                handle = client.get_workflow_handle(wf_id)
                desc = await handle.describe()
                p = await handle.query(RolloutWorkflow.progress)
                finished &= desc.status != WorkflowExecutionStatus.RUNNING
                mean = f", mean outcome {p.mean_outcome:.2f}" if p.mean_outcome is not None else ""
                lines.append(
                    f"{wf_id} [{p.setting}]: {p.groups_done}/{p.groups_total} groups, {p.running} running, "
                    f"{p.episodes_done} episodes{mean}, {p.published} samples"
                )
                for name, sp in p.per_setting.items():  # a mixed rollout: each setting's share
                    m = f", mean outcome {sp.mean_outcome:.2f}" if sp.mean_outcome is not None else ""
                    lines.append(
                        f"  {name}: {sp.groups_done}/{sp.groups_total} groups, {sp.episodes_done} episodes{m}, "
                        f"{sp.published} samples"
                    )
            text = "\n".join(lines) or "no running rollouts"
            if text != last:
                print(text, flush=True)
                last = text
            if args.once or (args.rollout_id and finished):
                return 0
            await asyncio.sleep(1.0 if tty else 2.0)
    except (KeyboardInterrupt, asyncio.CancelledError):
        return 0


def add_parser(sub: argparse._SubParsersAction, func) -> None:
    ep = sub.add_parser(
        "episodes", help="general-agent episodes: list, show, retry, tasks, start, group, rollout, watch"
    )
    _filters(ep)
    ep.set_defaults(func=func, exits_hard=True, episodes_command=None)
    esub = ep.add_subparsers(dest="episodes_command")
    ls = esub.add_parser("list", help="episodes with status, steps, outcome and reward (the default)")
    _filters(ls)
    sh = esub.add_parser("show", help="one episode's trajectory: action, observation, votes, step reward, advantage")
    sh.add_argument("episode_id")
    sh.add_argument("--json", action="store_true")
    ex = esub.add_parser(
        "export",
        help="write one episode as our JSON (what show --json prints) and, beside it, as an ATIF trajectory "
        "(Harbor's trajectory format: FILE.json -> FILE.atif.json, token ids and log-probs included)",
    )
    ex.add_argument("episode_id")
    ex.add_argument("--out", metavar="FILE", help="our JSON's file (default: the episode id, made a file name, .json)")
    ex.add_argument(
        "--format",
        choices=("both", "json", "atif"),
        default="both",
        help="both files (default), our JSON only, or the ATIF file only (written to FILE itself)",
    )
    rt = esub.add_parser("retry", help="start failed episodes again with their original input")
    _filters(rt)
    rt.add_argument("--dry-run", action="store_true", help="only say what would be retried")
    tk = esub.add_parser("tasks", help="the tasks each setting offers")
    tk.add_argument("--setting", help=f"{', '.join(SETTINGS)} or a plugin's setting")
    tk.add_argument("--json", action="store_true")
    for name, what in (("start", "one episode"), ("group", "a task group"), ("rollout", "a rollout over a task set")):
        p = esub.add_parser(name, help=f"start {what}", aliases=["run"] if name == "start" else [])
        p.add_argument("--setting", required=name != "rollout", help=f"{', '.join(SETTINGS)} or a plugin's setting")
        if name != "rollout":
            p.add_argument("--task", required=True)
            p.add_argument("--seed", type=int, help="gui: the task's own seed (the task id becomes TASK/SEED)")
        else:
            p.add_argument("--tasks", nargs="*", help="task ids (default: every task of the setting)")
            p.add_argument(
                "--mix",
                nargs="+",
                metavar="SETTING[:TASKS][@N]",
                help="a mixed rollout instead of --setting: one part per setting, its groups interleaved "
                "round-robin; SETTING alone takes every task of it, SETTING:A,B those tasks, @N episodes per task "
                "(default --samples). E.g. --mix terminal:files-dedupe,text-top-ips swe:pager__paginate-1 "
                "toolcall:math/0 gui:click-button",
            )
            p.add_argument("--parallel", type=int, default=8, help="episodes at once")
            p.add_argument("--passes", type=int, default=1)
        if name != "start":
            p.add_argument("--samples", type=int, default=8, help="episodes per task")
            p.add_argument("--no-publish", action="store_true", help="evaluate only: no training samples")
        p.add_argument("--wait", action="store_true", help="wait and print the result")
    wt = esub.add_parser("watch", help="live progress of running rollouts")
    wt.add_argument("rollout_id", nargs="?")
    wt.add_argument("--once", action="store_true", help="print once and exit")


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--setting", default=argparse.SUPPRESS, help=f"{', '.join(SETTINGS)} or a plugin's setting")
    p.add_argument("--task", default=argparse.SUPPRESS)
    p.add_argument("--status", choices=list(STATUSES), default=argparse.SUPPRESS)
    p.add_argument("--since", default=argparse.SUPPRESS, help="30m, 2h, 1d or an ISO date")
    p.add_argument("--limit", type=int, default=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    p.add_argument("--workflow-queue", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
