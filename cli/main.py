"""The `openclaw-rl` command line."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

from pydantic import ValidationError

from openclaw_rl import console as style
from openclaw_rl.logs import configure_logging
from openclaw_rl.settings import ConfigError, Pool, Settings, load_settings


def _settings() -> Settings:
    try:
        return load_settings()
    except ValidationError as exc:
        # Each error by its setting's name, never echoing the value: it may be a key or a password.
        lines = [
            f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}"
            for e in exc.errors(include_url=False, include_input=False)
        ]
        style.error(None, "invalid settings:\n  " + "\n  ".join(lines))
        raise SystemExit(1) from exc  # as SystemExit(message) did: the message on stderr, exit 1
    except ConfigError as exc:
        style.error(None, f"invalid settings: {exc}")
        raise SystemExit(1) from exc


def _exit(code: int) -> None:
    """Leave without interpreter teardown: the Temporal client's native threads can
    crash a finishing interpreter (exit 134/139) after the work succeeded."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def cmd_up(args: argparse.Namespace, settings: Settings) -> int:
    from stack.launcher import run_stack

    return asyncio.run(run_stack(settings))


def cmd_engine(args: argparse.Namespace, settings: Settings) -> int:
    from engine.main import serve_engine

    serve_engine(settings, model_path=args.model, port=args.port, weight_version=args.weight_version)
    return 0


def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    from workers.main import run_worker

    asyncio.run(run_worker(settings, Pool(args.pool)))
    return 0


def cmd_megatron_node(args: argparse.Namespace, settings: Settings) -> int:
    from trainers.megatron_node import serve_node

    try:
        return serve_node(settings.training.megatron, device=args.device, jobs=args.jobs)
    except ValueError as exc:
        style.error("megatron-node", str(exc))
        return 2


def cmd_api(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    # By its import path: the API's factory reads the same settings sources as this process.
    uvicorn.run(
        "api.main:app",
        factory=True,
        host=settings.api.host,
        port=settings.api.port,
        log_level="warning",
        access_log=False,
    )
    return 0


def cmd_config(args: argparse.Namespace, settings: Settings) -> int:
    print(json.dumps(settings.masked(), indent=2))
    return 0


def cmd_encryption(args: argparse.Namespace, settings: Settings) -> int:
    from openclaw_rl.encryption import Keyring

    keyring = settings.keyring()
    if args.encryption_command == "new-key":
        entry = f"{args.id}:{Keyring.new_key()}"
        print(entry)
        current = settings.encryption_keys.get_secret_value()
        style.note(
            "Put it first in OPENCLAW_RL_ENCRYPTION_KEYS (the first key encrypts; keep the old ones after it until "
            f"nothing written under them is retained), e.g.\n  OPENCLAW_RL_ENCRYPTION_KEYS='{entry}"
            + (",<the current keys>'" if current else "'"),
            err=True,
        )
        return 0
    if args.encryption_command == "codec-token":
        token = settings.codec_token()
        if token is None:
            style.note(
                "encryption at rest is off (OPENCLAW_RL_ENCRYPTION_KEYS is empty): there is no codec server", err=True
            )
            return 1
        print(token)
        style.note(
            f"The codec server's token (api.codec_token, else derived from the first key). The Temporal CLI: "
            f"--codec-endpoint http://{settings.api.host}:{settings.api.port}/codec --codec-auth 'Bearer <token>'",
            err=True,
        )
        return 0
    if keyring is None:
        print("encryption at rest: off (OPENCLAW_RL_ENCRYPTION_KEYS is empty)")
    else:
        print(f"encryption at rest: on, encrypting with {keyring.current!r}; keyring: {', '.join(keyring.key_ids)}")
    return 0


def cmd_keys(args: argparse.Namespace, settings: Settings) -> int:
    from cli.admin import keys_command

    return asyncio.run(keys_command(args, settings))


def cmd_users(args: argparse.Namespace, settings: Settings) -> int:
    from cli.admin import users_command

    return asyncio.run(users_command(args, settings))


def cmd_sessions(args: argparse.Namespace, settings: Settings) -> int:
    from cli.admin import sessions_command

    return asyncio.run(sessions_command(args, settings))


def cmd_turns(args: argparse.Namespace, settings: Settings) -> int:
    from cli.admin import turns_command

    return asyncio.run(turns_command(args, settings))


def cmd_deploy(args: argparse.Namespace, settings: Settings) -> int:
    from cli.deploy import deploy_command

    return asyncio.run(deploy_command(args, settings))


def cmd_train(args: argparse.Namespace, settings: Settings) -> int:
    if args.train_command == "curves":  # files on disk: no stack needed
        from cli.admin import curves_command

        return curves_command(settings)
    from cli.admin import train_command

    return asyncio.run(train_command(args, settings))


def cmd_episodes(args: argparse.Namespace, settings: Settings) -> int:
    from cli.episodes import episodes_command

    return asyncio.run(episodes_command(args, settings))


def cmd_bench(args: argparse.Namespace, settings: Settings) -> int:
    """The benchmarks are a client of the whole system on the top floor, run as their own program (`python -m
    bench`, in this process's place: the same pid, signals and exit status); nothing imports them."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", "bench", *args.bench_args])
    return 1  # not reached


def cmd_eval(args: argparse.Namespace, settings: Settings) -> int:
    from cli.eval import eval_command

    return asyncio.run(eval_command(args, settings))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="openclaw-rl", description="OpenClaw-RL on Temporal: agents that improve by being used."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("up", help="start and supervise the whole local stack (Ctrl-C stops it)").set_defaults(
        func=cmd_up, exits_hard=True
    )
    eng = sub.add_parser("engine", help="serve a model behind SGLang's HTTP API (the embedded policy engine)")
    eng.add_argument(
        "--model",
        type=Path,
        default=None,
        help="local Hugging Face checkpoint (default: engine.model_path, else the built-in tiny Qwen3)",
    )
    eng.add_argument("--port", type=int, default=None, help="port (default: engine.port)")
    eng.add_argument("--weight-version", default="0", help="version label of the initial weights")
    eng.set_defaults(func=cmd_engine, exits_hard=False)
    wk = sub.add_parser("worker", help="run one worker pool")
    wk.add_argument("--pool", required=True, choices=[p.value for p in Pool])
    wk.set_defaults(func=cmd_worker, exits_hard=True)
    sub.add_parser("api", help="serve the REST API").set_defaults(func=cmd_api, exits_hard=False)
    mn = sub.add_parser(
        "megatron-node",
        help="run this node's ranks of every multi-node megatron job (training.megatron: nnodes, node_rank >= 1, "
        "master_addr, master_port, nproc_per_node)",
    )
    mn.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto", help="must match the trainer pool's")
    mn.add_argument("--jobs", type=int, default=None, help="serve this many jobs, then exit (default: until stopped)")
    mn.set_defaults(func=cmd_megatron_node, exits_hard=False)
    keys = sub.add_parser("keys", help="manage API keys (each bound to a user)")
    ksub = keys.add_subparsers(dest="keys_command", required=True)
    kc = ksub.add_parser("create", help="create a key for a user; prints it once")
    kc.add_argument("--user", required=True, help="user id the key acts as")
    ksub.add_parser("list", help="list keys (ids, users, state; never the keys)")
    kr = ksub.add_parser("revoke", help="revoke a key by its id")
    kr.add_argument("key_id")
    keys.set_defaults(func=cmd_keys, exits_hard=False)
    us = sub.add_parser(
        "users",
        help="a user's rights over their data: export it, forget it, opt out of training",
        description="What is held about a user, and their say over it (docs/user-data.md).\n\n"
        "examples:\n"
        "  openclaw-rl users export alice --out alice.json\n"
        "  openclaw-rl users opt-out alice            # every key of alice: served, never trained on\n"
        "  openclaw-rl users opt-out --key 3f2a9c01d4e5  # one key only\n"
        "  openclaw-rl users opt-in alice\n"
        "  openclaw-rl users report alice            # did it get better for alice? (docs/evaluation.md)\n"
        "  openclaw-rl users forget alice --yes",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    usub = us.add_subparsers(dest="users_command", required=True)
    ue = usub.add_parser("export", help="everything held about a user, as JSON (turns, judgements, samples, ...)")
    ue.add_argument("user")
    ue.add_argument("--out", metavar="FILE", help="write it to FILE (mode 600) instead of stdout")
    ur = usub.add_parser(
        "report",
        help="did it get better for a user? the serving version against their first and previous versions, on "
        "their own held-out turns (eval.progress)",
        description="Computes the user's progress report now (a ProgressReportWorkflow: the serving version answers "
        "their held-out turns again, the judge compares both orders) and shows it, with a plot of its history "
        "(docs/evaluation.md).\n\n"
        "examples:\n"
        "  openclaw-rl users report alice\n"
        "  openclaw-rl users report alice --cached --json   # the latest report, computed by the schedule",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ur.add_argument("user")
    ur.add_argument("--cached", action="store_true", help="show the latest report instead of computing one now")
    ur.add_argument("--json", action="store_true", help="the latest report as JSON")
    ur.add_argument("--plot", metavar="FILE", help="where to draw the history (default: <data dir>/reports/)")
    uf = usub.add_parser("forget", help="remove everything held about a user, their keys included (no undo)")
    uf.add_argument("user")
    uf.add_argument("--yes", action="store_true", help="really do it")
    for name, what in (("opt-out", "keep out of training"), ("opt-in", "let back into training")):
        uo = usub.add_parser(name, help=f"{what}: a user (every key of theirs) or one key")
        who = uo.add_mutually_exclusive_group(required=True)
        who.add_argument("user", nargs="?", help="the user")
        who.add_argument("--key", metavar="KEY_ID", help="only this key (its id, from `openclaw-rl keys list`)")
    us.set_defaults(func=cmd_users, exits_hard=True)
    ss = sub.add_parser("sessions", help="list chat sessions (SessionWorkflows)")
    ss.add_argument("--user", default=None, help="only this user's sessions")
    ss.add_argument("--limit", type=int, default=50)
    ss.add_argument("--json", action="store_true", help="JSON instead of a table")
    ss.set_defaults(func=cmd_sessions, exits_hard=True)
    tt = sub.add_parser("turns", help="show a session's turn log")
    tt.add_argument("session_id")
    tt.add_argument("--user", required=True, help="the session's user (sessions are scoped by user)")
    tt.add_argument("--offset", type=int, default=0)
    tt.add_argument("--limit", type=int, default=50)
    tt.add_argument("--json", action="store_true", help="JSON instead of a table")
    tt.add_argument(
        "--export",
        metavar="FILE",
        help="write the page of turns to FILE as our JSON (what --json prints) and, beside it, as an ATIF trajectory "
        "(FILE.json -> FILE.atif.json: Harbor's trajectory format, token ids and log-probs included)",
    )
    tt.add_argument(
        "--format",
        choices=("both", "json", "atif"),
        default="both",
        help="with --export: both files (default), our JSON only, or the ATIF file only (written to FILE itself)",
    )
    tt.set_defaults(func=cmd_turns, exits_hard=True)
    tr = sub.add_parser("train", help="the training workflow: start, status, pause, resume, batch size, checkpoint")
    trs = tr.add_subparsers(dest="train_command", required=True)
    trs.add_parser("start", help="start the policy's TrainingWorkflow (no-op if it runs)")
    st = trs.add_parser("status", help="version, steps, samples, last metrics")
    st.add_argument("--json", action="store_true")
    st.add_argument("--watch", action="store_true", help="keep a live progress line until Ctrl-C")
    st.add_argument("--until-version", type=int, metavar="N", help="with --watch: stop once version N is served")
    ck = trs.add_parser("checkpoint", help="save the current version under checkpoints/saved/LABEL (never pruned)")
    ck.add_argument("--label", help="default: policy-<version>")
    trs.add_parser(
        "curves",
        help="where training's TensorBoard curves are (loss, KL, entropy, rewards and advantages per stream, by "
        "version), and the command that opens them; the W&B offline runs too (curves.wandb)",
    )
    trs.add_parser("pause", help="finish the current step, then wait")
    trs.add_parser("resume", help="continue after pause")
    bs = trs.add_parser("batch-size", help="samples per step from the next step on")
    bs.add_argument("n", type=int)
    tr.set_defaults(func=cmd_train, exits_hard=True)
    from cli.episodes import add_parser as add_episodes_parser

    add_episodes_parser(sub, cmd_episodes)
    bench = sub.add_parser(
        "bench",
        add_help=False,  # `openclaw-rl bench --help` is the benchmarks' own help:
        prefix_chars="+",  # every word after `bench`, options too, is passed on as written
        help="benchmarks that run the whole system: personalization (Table 3), two-users (an agent per user), "
        "agents (Table 4, Figure 4), hosts (the deployment as 8 hosts in network namespaces)",
        description="The benchmarks, run as their own program (python -m bench): `openclaw-rl bench --help` lists "
        "them, `openclaw-rl bench <benchmark> --help` tells one's options.",
    )
    bench.add_argument("bench_args", nargs=argparse.REMAINDER, help="the benchmark and its options")
    bench.set_defaults(func=cmd_bench, exits_hard=False)
    from cli.eval import add_parser as add_eval_parser

    add_eval_parser(sub, cmd_eval)
    from cli.deploy import add_parser as add_deploy_parser

    add_deploy_parser(sub, cmd_deploy)
    enc = sub.add_parser(
        "encryption",
        help="encryption at rest: make a key, show the keyring",
        description="Conversation data encrypted at rest (AES-256-GCM) under OPENCLAW_RL_ENCRYPTION_KEYS.\n\n"
        "examples:\n  openclaw-rl encryption new-key --id k2026\n  openclaw-rl encryption status\n"
        "  openclaw-rl encryption codec-token",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    encs = enc.add_subparsers(dest="encryption_command", required=True)
    nk = encs.add_parser("new-key", help="print a fresh random key as id:base64 (nothing is stored)")
    nk.add_argument("--id", default="k1", help="the key's id (letters, digits, '-', '_'; default k1)")
    encs.add_parser("status", help="whether encryption is on, and the keyring's key ids (never the keys)")
    encs.add_parser(
        "codec-token", help="print the token the API's codec server (/codec) requires (for the Temporal CLI)"
    )
    enc.set_defaults(func=cmd_encryption, exits_hard=False)
    sub.add_parser("config", help="print the effective settings (secrets masked)").set_defaults(
        func=cmd_config, exits_hard=False
    )
    from cli.examples import with_examples

    return with_examples(parser)


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    settings = _settings()
    configure_logging(settings.log.level, settings.log.json_lines, process=args.command)
    if args.command in ("api", "engine", "worker", "megatron-node"):  # the processes a turn or a step goes through
        from openclaw_rl import tracing

        tracing.setup(f"worker-{args.pool}" if args.command == "worker" else args.command)
    try:
        code = args.func(args, settings)
    except KeyboardInterrupt:
        code = 130
    if args.exits_hard:
        _exit(code)
    raise SystemExit(code)


if __name__ == "__main__":
    main()
