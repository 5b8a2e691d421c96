"""`openclaw-rl eval`: evaluate a policy version now, list every version's scores, and see or change the eval
schedule (docs/evaluation.md)."""

from __future__ import annotations

import argparse
import io
import json

from contracts.evaluation import EvalInput, EvalResult, SetScores, eval_schedule_id
from openclaw_rl import console as style
from openclaw_rl.settings import Settings

DESCRIPTION = (
    "Evaluation of policy versions on held-out sets: the personalization benchmark's held-out problems (rule "
    "scorer), your own JSONL sets (eval.user_sets) and general-agent settings' held-out tasks run as episodes "
    "(eval.episodes). A Temporal Schedule evaluates every eval.every_versions-th "
    "version; scores go to the store, TensorBoard (<data dir>/tensorboard/eval) and the Web UI's search attributes."
)


def add_parser(sub: argparse._SubParsersAction, func) -> None:
    ev = sub.add_parser("eval", help="evaluate policy versions: run one now, list scores, the schedule")
    ev.description = DESCRIPTION
    ev.set_defaults(func=func, exits_hard=True)
    esub = ev.add_subparsers(dest="eval_command", required=True)
    run = esub.add_parser(
        "run",
        help="evaluate a version now, as an EvaluationWorkflow, and print its scores (sets done already are kept)",
    )
    run.add_argument(
        "--set",
        dest="sets",
        action="append",
        metavar="NAME",
        help="personalization-student, personalization-teacher, user-<name> or episodes-<setting>; repeatable "
        "(default: eval's sets)",
    )
    run.add_argument("--version", type=int, help="a version the servers serve now (default: the latest published)")
    run.add_argument("--json", action="store_true", help="the result as JSON")
    ls = esub.add_parser("list", help="the versions evaluated and their scores, a table")
    ls.add_argument("--json", action="store_true", help="JSON instead of a table")
    sc = esub.add_parser("schedule", help="show the eval schedule, or change its N, pause, unpause or delete it")
    what = sc.add_mutually_exclusive_group()
    what.add_argument("--every", type=int, metavar="N", help="evaluate every Nth version (until `up` reapplies it)")
    what.add_argument("--pause", action="store_true", help="stop taking evaluations (kept across `up`)")
    what.add_argument("--unpause", action="store_true", help="take evaluations again")
    what.add_argument("--delete", action="store_true", help="remove it (`up` creates it again unless N is 0)")


async def eval_command(args: argparse.Namespace, settings: Settings) -> int:
    if args.eval_command == "list":
        return await _list(args, settings)
    from openclaw_rl.temporal_client import connect

    client = await connect(settings.temporal, keyring=settings.keyring())
    if args.eval_command == "run":
        return await _run(client, args, settings)
    return await _schedule(client, args, settings)


async def _run(client, args: argparse.Namespace, settings: Settings) -> int:
    from temporalio.client import WorkflowFailureError
    from temporalio.exceptions import ApplicationError

    from control.evaluation import run_evaluation

    try:
        result = await run_evaluation(client, settings, sets=args.sets, version=args.version)
    except LookupError as exc:  # an episode set of a setting no environment provides
        style.error("eval run", str(exc))
        return 1
    except WorkflowFailureError as exc:
        cause = exc.cause
        while cause is not None and not isinstance(cause, ApplicationError):  # the activity's own error says why
            cause = cause.cause
        style.error("eval run", cause.message if cause else str(exc))
        return 1
    if args.json:
        print(result.model_dump_json(indent=2))
    else:
        print(run_text(result))
    return 0


def run_text(result: EvalResult) -> str:
    if result.skipped:
        return f"nothing evaluated: {result.skipped}"
    return f"version {result.version}:\n" + "\n".join(f"  {_scores_line(s)}" for s in result.scores)


def _scores_line(s: SetScores) -> str:
    metrics = ", ".join(f"{k} {v:.3f}" for k, v in s.metrics.items())
    return f"{s.set:<28} {metrics} ({s.count} items)"


async def _list(args: argparse.Namespace, settings: Settings) -> int:
    from store.client import Store

    async with Store.from_settings(settings) as store:
        scores = await store.evals.all()
    if args.json:
        print(json.dumps([s.model_dump(mode="json") for s in scores], indent=2))
    else:
        print(list_table(scores))
    return 0


def list_table(scores: list[SetScores]) -> str:
    """One row per evaluated version, one column per set (its metric's value)."""
    if not scores:
        return "no version evaluated yet (openclaw-rl eval run, or wait for the schedule)"
    sets = sorted({s.set for s in scores})
    by_version: dict[int, dict[str, SetScores]] = {}
    for s in scores:
        by_version.setdefault(s.version, {})[s.set] = s
    rows = []
    for version in sorted(by_version):
        got = [by_version[version].get(name) for name in sets]
        rows.append([version, *(f"{next(iter(g.metrics.values())):.3f}" if g and g.metrics else None for g in got)])
    buf = io.StringIO()
    style.table(["version", *sets], rows, right=["version", *sets], file=buf)
    metrics = sorted({f"{s.set}: {m}" for s in scores for m in s.metrics})
    return buf.getvalue() + "\n(" + "; ".join(metrics) + ")"


async def _schedule(client, args: argparse.Namespace, settings: Settings) -> int:
    from temporalio.service import RPCError, RPCStatusCode

    from control.evaluation import delete_eval_schedule, set_every_versions

    schedule_id = eval_schedule_id(settings.api.model_name)
    handle = client.get_schedule_handle(schedule_id)
    try:
        if args.delete:
            gone = await delete_eval_schedule(client, settings)
            print(f"{schedule_id}: deleted" if gone else f"{schedule_id}: there is none")
            return 0
        if args.every is not None:
            if args.every < 1:
                style.error("eval schedule", "--every takes N >= 1 (--pause or --delete to stop)")
                return 2
            await set_every_versions(client, settings, args.every)
        elif args.pause:
            await handle.pause(note="paused with openclaw-rl eval schedule --pause")
        elif args.unpause:
            await handle.unpause(note="unpaused with openclaw-rl eval schedule --unpause")
        desc = await handle.describe()
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            style.error(
                "eval schedule", f"{schedule_id}: no such schedule (`up` creates it when eval.every_versions > 0)"
            )
            return 1
        raise
    (inp,) = await client.data_converter.decode(desc.schedule.action.args, [EvalInput])
    state = "paused" if desc.schedule.state.paused else "active"
    print(f"{schedule_id}: {state}, evaluates every {inp.config.every_versions}th version")
    print(f"  sets:   {', '.join(inp.config.sets) or '(none)'}")
    every_s = desc.schedule.spec.intervals[0].every.total_seconds() if desc.schedule.spec.intervals else 0
    print(f"  checks: every {every_s:g} s; {desc.info.num_actions} evaluations started")
    if desc.info.next_action_times and not desc.schedule.state.paused:
        print(f"  next:   {desc.info.next_action_times[0]:%Y-%m-%d %H:%M:%S %Z}")
    return 0
