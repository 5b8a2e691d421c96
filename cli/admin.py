"""Operator commands: API keys, sessions and turn logs, training, from the terminal."""

from __future__ import annotations

import argparse
import asyncio
import json

from openclaw_rl import console as style
from openclaw_rl.masking import mask_url
from openclaw_rl.settings import Settings
from store.client import Store
from store.errors import StoreUnavailable


async def keys_command(args: argparse.Namespace, settings: Settings) -> int:
    from control.api_keys import InvalidUserId, KeyStore

    db = Store.from_settings(settings)
    store = KeyStore(db.api_keys, settings.api_key_pepper.get_secret_value())
    try:
        if args.keys_command == "create":
            rec, key = await store.create(args.user)
            await db.users.clear_tombstone(rec.user_id)  # a forgotten id given a key again is a new user
            print(key)  # alone on its line: scripts take the first word
            style.note(f"key id {rec.key_id} for user {rec.user_id}; this is the only time the key is shown.")
        elif args.keys_command == "list":
            recs = await store.list()
            style.table(
                ["KEY ID", "USER", "CREATED (UTC)", "STATE"],
                [
                    [
                        r.key_id,
                        r.user_id,
                        f"{r.created_at:%Y-%m-%d %H:%M}",
                        f"revoked {r.revoked_at:%Y-%m-%d %H:%M}" if r.revoked_at else "active",
                    ]
                    for r in recs
                ],
            )
        elif args.keys_command == "revoke":
            rec = await store.revoke(args.key_id)
            if rec is None:
                style.error("keys", f"no key with id {args.key_id} (see `openclaw-rl keys list`)")
                return 1
            style.success(f"revoked key {rec.key_id} of user {rec.user_id}")
        return 0
    except InvalidUserId as exc:
        style.error("keys", str(exc))
        return 2
    except StoreUnavailable as exc:
        _store_unreachable("keys", settings, exc)
        return 1
    finally:
        await db.aclose()


def _store_unreachable(command: str, settings: Settings, exc: Exception) -> None:
    style.error(
        command,
        f"cannot reach the store at {mask_url(settings.redis.target())}: {exc}. Is the stack up (`openclaw-rl up`)?",
    )


async def _client(settings: Settings, command: str | None = None):
    from openclaw_rl.temporal_client import connect

    try:
        return await connect(settings.temporal, keyring=settings.keyring())
    except RuntimeError as exc:
        style.error(
            command,
            f"cannot reach Temporal at {mask_url(settings.temporal.target())}: {exc}. "
            "Is the stack up (`openclaw-rl up`)?",
        )
        raise SystemExit(1) from None  # as the SystemExit(message) this was: stderr, exit 1


async def sessions_command(args: argparse.Namespace, settings: Settings) -> int:
    from control.audit import list_sessions

    client = await _client(settings, "sessions")
    store = Store.from_settings(settings)
    try:  # Temporal knows users by pseudonym: the store's name records show them by name
        sessions = await list_sessions(client, args.user, args.limit, store=store)
    except StoreUnavailable as exc:
        _store_unreachable("sessions", settings, exc)
        return 1
    finally:
        await store.aclose()
    if args.json:
        print(json.dumps([s.model_dump(mode="json") for s in sessions], indent=2))
        return 0
    style.table(
        ["SESSION", "USER", "STATUS", "STARTED (UTC)", "POLICY"],
        [
            [
                s.session_id[:38],
                s.user_id[:18],
                s.status,
                f"{s.started_at:%Y-%m-%d %H:%M}" if s.started_at else None,
                s.policy_version,
            ]
            for s in sessions
        ],
        right={"POLICY"},
    )
    return 0


async def turns_command(args: argparse.Namespace, settings: Settings) -> int:
    from control.audit import SessionNotFound, session_turns

    client = await _client(settings, "turns")
    store = Store.from_settings(settings)
    try:
        log = await session_turns(client, store, args.user, args.session_id, args.offset, args.limit)
    except SessionNotFound:
        style.error(
            "turns",
            f"no session {args.session_id!r} for user {args.user!r} (see `openclaw-rl sessions --user {args.user}`)",
        )
        return 1
    else:
        if getattr(args, "export", None):
            return await _export_turns(store, log, args)
    finally:
        await store.aclose()
    if args.json:
        print(log.model_dump_json(indent=2))
        return 0
    print(
        f"session {log.session_id} ({log.workflow_id}): {log.status}, {log.total} turns"
        + (f", ended: {log.closed_reason}" if log.closed_reason else "")
    )
    for t in log.turns:
        kind = t.turn_type.value + (f"/{t.side_kind}" if t.side_kind else "")
        print(
            f"\n#{t.index} {kind} {t.received_at:%Y-%m-%d %H:%M:%S} policy v{t.weight_version or '?'} {t.status} "
            f"{t.prompt_tokens}+{t.completion_tokens} tokens, {t.finish_reason or '-'}"
        )
        print(f"  prompt:   {_one_line(t.prompt_summary)}")
        reply = _one_line(t.response_summary) + "".join(
            f" [tool_call {c.name}({_one_line(c.arguments, 60)})]" for c in t.tool_calls
        )
        print(f"  response: {reply}")
        if t.next_state is not None:
            print(f"  next:     ({t.next_state.role}) {_one_line(t.next_state.summary)}")
        elif t.next_state_status != "n/a":
            print(f"  next:     {t.next_state_status}")
        if t.judgement is not None:
            j, r = t.judgement.judge, t.judgement.result
            votes = ", ".join("-" if v is None else f"{v:+d}" for v in j.prm_votes) or "none"
            line = f"  judged:   {j.judge} votes [{votes}] -> {j.eval_score if j.eval_score is not None else '-'}"
            line += (
                f"; sample: reward {r.reward:+.1f}, mask {r.loss_mask}, advantage mean {r.advantage_mean:+.3f} "
                f"[{r.advantage_min:+.3f}, {r.advantage_max:+.3f}] ({r.reason})"
                if r.published
                else f"; no sample ({'duplicate' if r.duplicate else r.reason})"
            )
            print(line)
            if j.hint:
                print(f"  hint:     {_one_line(j.hint)}")
        if t.mismatch is not None:
            x = t.mismatch
            age = "same weights" if x.staleness == 0 else f"{x.staleness} versions behind" if x.staleness else "?"
            over = f", {x.over} tokens over the bound" if x.over else ""
            print(
                f"  trained:  from v{x.trained_from if x.trained_from is not None else '?'} ({age}); mismatch mean "
                f"{x.mean:.2e}, max {x.max:.2e} over {x.tokens} tokens{over}"
            )
        if t.error:
            print(f"  error:    {t.error}")
    return 0


async def _export_turns(store: Store, log, args: argparse.Namespace) -> int:
    """`turns --export FILE`: our JSON at FILE and the ATIF trajectory beside it (or one of them, by --format)."""
    from pathlib import Path

    from control.atif import atif_path, load_turns_trajectory, write_private, write_trajectory

    path = Path(args.export)
    fmt = getattr(args, "format", "both")
    written = []
    if fmt in ("both", "json"):
        write_private(path, log.model_dump_json(indent=2) + "\n")
        written.append(str(path))
    if fmt in ("both", "atif"):
        if not log.turns:
            style.error("turns", f"session {log.session_id}: no turns in this page to export as ATIF")
            return 1
        where = atif_path(path) if fmt == "both" else path
        write_trajectory(await load_turns_trajectory(store, log, user_id=args.user), where)
        written.append(str(where))
    print(f"{len(log.turns)} turns of session {log.session_id}: " + ", ".join(written))
    return 0


def _one_line(text: str, n: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


def curves_command(settings: Settings) -> int:
    import shutil
    import sys

    from activities.curves import curves_dir
    from activities.step_log import STEP_LOG, read_steps

    where = curves_dir(settings.data_dir)
    steps = read_steps(settings.records_dir)
    tensorboard = shutil.which("tensorboard") or f"{sys.prefix}/bin/tensorboard"
    print(f"TensorBoard event files: {where}  ({len(steps)} steps recorded in {settings.records_dir / STEP_LOG})")
    print(f"open them with:  {tensorboard} --logdir {where}   (then http://localhost:6006)")
    if steps:
        last = steps[-1]
        print(f"last step: version {last.version}, loss {last.metrics.loss:+.4f}, entropy {last.metrics.entropy:.3f}")
    _wandb_where(settings)
    return 0


def _wandb_where(settings: Settings) -> None:
    """Where the W&B offline runs are and how to look at them: on this machine, or uploaded later."""
    import importlib.util
    import shutil
    import sys

    from activities.curves import wandb_dir, wandb_runs

    wb = settings.curves.wandb
    where, runs = wandb_dir(settings.data_dir), wandb_runs(settings.data_dir)
    if not wb.enabled and not runs:
        print("W&B offline runs: off (curves.wandb.enabled = true, or OPENCLAW_RL_CURVES__WANDB__ENABLED=true)")
        return
    state = "on" if wb.enabled else "off now"
    print(f"W&B offline runs: {where}  ({len(runs)} runs; curves.wandb {state}, project {wb.project})")
    if importlib.util.find_spec("wandb") is None:
        print("  the wandb package is not installed here: pip install 'openclaw-rl[wandb]'")
        return
    wandb = shutil.which("wandb") or f"{sys.prefix}/bin/wandb"
    run = runs[-1] if runs else where / "offline-run-<time>-<id>"
    print(f"view them here:  {wandb} leet {where}   (a terminal UI)")
    print(f"a run's values:  {wandb} leet inspect --summary {run}")
    print(f"upload later:    {wandb} sync {where / 'offline-run-*'}   (after `wandb login`, where there is network)")


async def train_command(args: argparse.Namespace, settings: Settings) -> int:
    from temporalio.client import WorkflowUpdateFailedError
    from temporalio.service import RPCError

    from contracts.training import BatchSize, CheckpointRequest, training_workflow_id
    from control.training import start_training
    from workflows.training import TrainingWorkflow

    client = await _client(settings, "train")
    wf_id = training_workflow_id(settings.api.model_name)
    handle = client.get_workflow_handle(wf_id)
    try:
        if args.train_command == "start":
            print(f"training workflow {await start_training(client, settings)} is running")
        elif args.train_command == "status" and args.watch:
            return await _watch(handle, wf_id, args.until_version)
        elif args.train_command == "status":
            s = await handle.query(TrainingWorkflow.status)
            adapters = await _user_adapters(settings)
            if args.json:
                out = s.model_dump(mode="json")
                if adapters is not None:
                    out["user_adapters"] = {t: ref.model_dump() for t, ref in adapters.items()}
                print(json.dumps(out, indent=2))
                return 0
            state = "paused" if s.paused else "running"
            missing = f", {s.samples_dropped_missing} gone from the streams" if s.samples_dropped_missing else ""
            print(
                f"{wf_id}: {state}, policy version {s.version}, {s.steps} steps, "
                f"{s.samples_trained} samples trained, {s.samples_dropped_stale} dropped as stale{missing}"
            )
            print(
                f"next batch: {_bar(s.waiting_samples, s.batch_size)} {s.waiting_samples}/{s.batch_size} samples; "
                f"{s.backlog} more waiting in the streams"
            )
            if s.recent_losses:
                print("recent losses: " + " ".join(f"{x:+.4f}" for x in s.recent_losses[-8:]))
            m = s.last_metrics
            if m:
                print(
                    f"last step: loss {m.loss:+.4f}, clip fraction {m.clip_fraction:.3f}, approx KL {m.approx_kl:.2e}, "
                    f"mean advantage {m.mean_advantage:+.3f}, "
                    f"log-prob gap {m.logprob_gap:.2e}, grad norm {m.grad_norm:.3f}, {m.tokens_per_s:.0f} tokens/s"
                )
                if m.mismatch_mean is not None or m.mismatch_stale_mean is not None:
                    print("mismatch: " + mismatch_line(m))
            if s.durable_version is not None:
                cp = s.last_checkpoint
                written = f" (last written in {cp.write_s:.1f}s, {cp.bytes / 2**30:.2f} GiB)" if cp else ""
                print(
                    f"durable checkpoint: version {s.durable_version}{written}; {s.versions_since_durable} versions "
                    f"since live in the trainer's memory only; trainer lost them {s.trainer_lost} times"
                )
            print("memory: " + await _memory_line(settings, s.trainer_memory))
            if adapters is not None:
                shown = sorted(adapters.items(), key=lambda kv: -kv[1].version)[:8]
                more = f" (+{len(adapters) - len(shown)} more)" if len(adapters) > len(shown) else ""
                names = await _user_names(settings, [t for t, _ in shown])  # adapters are kept by pseudonym
                listed = ", ".join(f"{names.get(t, t)} v{ref.version}" for t, ref in shown) or "none yet"
                print(f"user adapters: {len(adapters)} users, by their own steps: {listed}{more}")
        elif args.train_command == "pause":
            await handle.signal(TrainingWorkflow.pause)
            print("pausing after the current step")
        elif args.train_command == "resume":
            await handle.signal(TrainingWorkflow.resume)
            print("resumed")
        elif args.train_command == "batch-size":
            await handle.signal(TrainingWorkflow.set_batch_size, BatchSize(batch_size=args.n))
            print(f"batch size {args.n} from the next step on")
        elif args.train_command == "checkpoint":
            print(
                f"saving version under {args.label or 'policy-<version>'} (after the step in progress, if any)...",
                flush=True,
            )
            saved = await handle.execute_update(TrainingWorkflow.checkpoint, CheckpointRequest(label=args.label))
            print(f"saved policy version {saved.version} as {saved.label}: {saved.path}")
        return 0
    except WorkflowUpdateFailedError as exc:
        cause: BaseException = exc.cause
        while cause.__cause__ is not None:  # an activity's failure wraps the reason
            cause = cause.__cause__
        style.error("train", f"checkpoint not saved: {getattr(cause, 'message', None) or cause}")
        return 1
    except RPCError as exc:
        style.error("train", f"{wf_id}: {exc.message}. Start it with `openclaw-rl train start`.")
        return 1
    except ValueError as exc:
        style.error("train", str(exc))
        return 2


async def _user_adapters(settings: Settings) -> dict | None:
    """Each user's adapter version (training.adapters = per_user), by tenant pseudonym; None when not per user."""
    if settings.training.adapters != "per_user":
        return None
    from store.client import Store

    async with Store.from_settings(settings) as store:
        return await store.adapters.all()


async def _user_names(settings: Settings, tenants: list[str]) -> dict[str, str]:
    """pseudonym -> user id, for the users who still exist (store.user_data's name records)."""
    async with Store.from_settings(settings) as store:
        return await store.users.names_of(tenants)


async def _watch(handle, wf_id: str, until_version: int | None) -> int:
    """A live progress line: the batch filling up, the version, the last step's loss."""
    from workflows.training import TrainingWorkflow

    status = style.StatusLine()
    try:
        while True:
            s = await handle.query(TrainingWorkflow.status)
            loss = f", last loss {s.last_metrics.loss:+.4f}" if s.last_metrics else ""
            line = (
                f"{wf_id} v{s.version} {'paused ' if s.paused else ''}{_bar(s.waiting_samples, s.batch_size)} "
                f"{s.waiting_samples}/{s.batch_size} samples, {s.steps} steps, {s.samples_trained} trained{loss}"
            )
            status.show(line)
            if until_version is not None and s.version >= until_version:
                break
            await asyncio.sleep(1.0)
    except (KeyboardInterrupt, asyncio.CancelledError):
        pass
    status.end()
    return 0


def mismatch_line(m) -> str:
    """A step's train-inference mismatch (StepMetrics): on-policy (staleness 0) first, then older samples."""
    parts = []
    if m.mismatch_mean is not None:
        parts.append(
            f"on-policy mean {m.mismatch_mean:.2e}, p99 {m.mismatch_p99:.2e}, max {m.mismatch_max:.2e} "
            f"({m.mismatch_samples} samples)"
        )
    if m.mismatch_stale_mean is not None:
        parts.append(
            f"older samples mean {m.mismatch_stale_mean:.2e}, p99 {m.mismatch_stale_p99:.2e} "
            f"({m.mismatch_stale_samples} samples)"
        )
    if m.mismatch_over:
        parts.append(f"{m.mismatch_over:.1%} of tokens over the bound, {m.mismatch_masked_tokens} masked")
    return "; ".join(parts)


def _bar(done: int, total: int, width: int = 24) -> str:
    return style.bar(done, total, width, empty=".")


def _gib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**30:.2f} GiB"


async def _memory_line(settings: Settings, trainer: dict[str, int]) -> str:
    """What each side holds: the trainer (as of its last step) and every policy server (asked now)."""
    parts = []
    if trainer:
        t = f"trainer weights {_gib(trainer.get('weights_bytes'))}, optimizer {_gib(trainer.get('optimizer_bytes'))}"
        if "cuda_reserved_bytes" in trainer:
            t += f", GPU reserved {_gib(trainer['cuda_reserved_bytes'])}"
        parts.append(t)
    from policy_client.weight_sync import WeightSyncClient

    try:
        async with WeightSyncClient.from_settings(settings) as client:
            servers = await client.server_memory()
    except Exception as exc:  # a status line must not fail for a server that is away
        servers = {}
        parts.append(f"servers: no memory report ({type(exc).__name__})")
    for url, mem in servers.items():
        if not mem:
            parts.append(f"{url}: unknown")
            continue
        line = f"{url}: weights {_gib(mem.get('weights_bytes'))}, KV cache {_gib(mem.get('kv_cache_bytes'))}"
        if mem.get("cuda_reserved_bytes") is not None:
            line += f", GPU reserved {_gib(mem.get('cuda_reserved_bytes'))}"
        parts.append(line)
    return "; ".join(parts) or "unknown"


async def _progress_report(args: argparse.Namespace, settings: Settings, client, store: Store, data) -> int:
    """Compute the user's progress report now (unless --cached) and show the latest, with its history's plot."""
    from pathlib import Path

    from cli.progress import plot, render
    from contracts.chat import tenant_of
    from control.progress import run_report
    from control.user_data_models import UserNotFound

    tenant = tenant_of(args.user)
    if not await data.known(args.user):
        raise UserNotFound(args.user)
    if not args.cached:
        summary = await run_report(client, settings, args.user)
        if summary.skipped:
            print(f"no new report for {args.user}: {summary.skipped}")
    reports = await store.progress.reports(tenant)
    if not reports:
        style.error("users", f"{args.user} has no progress report yet")
        return 1
    if args.json:
        print(reports[0].model_dump_json(indent=2))
        return 0
    print(render(args.user, reports[0], reports))
    path = Path(args.plot) if args.plot else settings.data_dir / "reports" / f"progress-{tenant}.png"
    if (png := await asyncio.to_thread(plot, reports, path)) is not None:
        print(f"  plot: {png}")
    return 0


async def users_command(args: argparse.Namespace, settings: Settings) -> int:
    """A user's rights over their data, for operators: export, forget, opt out of training and back in."""
    from control.user_data import UserData
    from control.user_data_models import UserNotFound

    client = await _client(settings, "users")
    store = Store.from_settings(settings)
    from control.user_adapters import FileAdapters

    data = UserData(client, store, settings, adapters=FileAdapters(settings, store))
    cmd = args.users_command
    try:
        if cmd == "export":
            doc = (await data.export(args.user)).model_dump_json(indent=2)
            if args.out:
                from pathlib import Path

                out = Path(args.out)
                out.write_text(doc + "\n", encoding="utf-8")
                out.chmod(0o600)  # it holds the user's conversations
                print(f"wrote everything held about {args.user} to {out}")
            else:
                print(doc)
        elif cmd == "report":
            return await _progress_report(args, settings, client, store, data)
        elif cmd == "forget":
            if not args.yes:
                style.error(
                    "users",
                    f"this removes everything held about {args.user} (conversations, samples, keys) "
                    "and cannot be undone; run it again with --yes",
                )
                return 2
            r = await data.forget(args.user)
            if r.already_forgotten and not r.removed():
                print(f"{args.user} was already forgotten (at {r.forgotten_at:%Y-%m-%d %H:%M} UTC); nothing left")
                return 0
            print(
                f"forgot {args.user}: {r.api_keys} API keys, {r.workflows} workflow executions, {r.store_keys} store "
                f"keys, {r.samples} samples not yet trained ({r.samples_claimed} claimed by a train step), "
                f"{r.records} record entries, {r.record_lines} record "
                f"lines, {r.trained_lines} trained.jsonl lines redacted, {r.adapter_versions} adapter versions"
                + ("" if r.append_only_file_rewritten else "; the store's append-only file was NOT rewritten")
                + ("" if r.engine_caches_flushed else "; a policy server's prefix cache was NOT emptied")
            )
        else:  # opt-out / opt-in
            out = cmd == "opt-out"
            user = args.user
            if args.key is not None:
                user = await data.key_owner(args.key)
                if user is None:
                    style.error("users", f"no key with id {args.key} (see `openclaw-rl keys list`)")
                    return 1
            keys = await data.set_opt_out(user, out, key_id=args.key)
            who = f"key {args.key} of {user}" if args.key else user
            state = "opted out of training" if out else "opted in to training"
            print(
                f"{who}: {state}; {user} as a whole: "
                f"{'out' if await store.users.user_opted_out(user) else 'in'}; keys out: {', '.join(keys) or 'none'}"
            )
        return 0
    except UserNotFound:
        style.error("users", f"nothing is held about user {args.user!r} (see `openclaw-rl keys list`)")
        return 1
    except StoreUnavailable as exc:
        _store_unreachable("users", settings, exc)
        return 1
    finally:
        await store.aclose()
