"""`openclaw-rl deploy`: the workflow pool's builds under Worker Versioning (control.deployments)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from openclaw_rl import console as style
from openclaw_rl.settings import Settings


def add_parser(sub: argparse._SubParsersAction, func: Callable) -> None:
    dp = sub.add_parser(
        "deploy",
        help="roll a new build of the workflow worker out (Worker Versioning: status, promote, ramp)",
        description="The workflow pool's builds as versions of a Temporal Worker Deployment (temporal.versioning). "
        "Start the new build's workflow worker beside the old one, promote it, and stop the old worker once status "
        "shows it drained: sessions, episodes and task groups finish on the build that started them; training, "
        "canaries and rollouts move at their next continue-as-new.",
    )
    dsub = dp.add_subparsers(dest="deploy_command", required=True)
    dsub.add_parser("status", help="the builds, which is current or ramping, which drain")
    pr = dsub.add_parser("promote", help="make a build current (new workflows go to it)")
    pr.add_argument("--build-id", help="the build (default: this checkout's, as its workflow worker derives it)")
    pr.add_argument(
        "--ramp", type=float, metavar="PERCENT", help="send only this share of new workflows to it (0-100) first"
    )
    # A Temporal client's native threads can crash a finishing interpreter (cli.main._exit).
    dp.set_defaults(func=func, exits_hard=True)


async def deploy_command(args: argparse.Namespace, settings: Settings) -> int:
    from cli.admin import _client
    from control.deployments import describe, make_current, ramp
    from workers.versioning import build_id

    if not settings.temporal.versioned():
        style.error(
            "deploy",
            "worker versioning is off: set OPENCLAW_RL_TEMPORAL__VERSIONING__ENABLED=true for every workflow worker",
        )
        return 2
    client = await _client(settings, "deploy")
    if args.deploy_command == "status":
        state = await describe(client, settings)
        if state is None:
            style.note(f"no build of {settings.temporal.versioning.deployment_name} has polled yet")
            return 0
        ramping = f", {state.ramping} ramping at {state.ramping_percent:g}%" if state.ramping else ""
        style.note(f"{state.name}: current {state.current or 'none'}{ramping}; this checkout is {build_id(settings)}")
        style.table(
            ["BUILD", "STATUS", "DRAINAGE", "CREATED (UTC)"],
            [
                [b.build_id, b.status, b.drainage or "-", f"{b.created_at:%Y-%m-%d %H:%M}" if b.created_at else "-"]
                for b in state.builds
            ],
        )
        return 0
    target = args.build_id or build_id(settings)
    if args.ramp is not None and not 0 <= args.ramp <= 100:
        style.error("deploy", f"--ramp takes a percentage from 0 to 100, not {args.ramp:g}")
        return 2
    try:
        if args.ramp is not None:
            await ramp(client, settings, target, args.ramp)
            style.success(f"{target} takes {args.ramp:g}% of new workflows")
        else:
            await make_current(client, settings, target)
            style.success(f"{target} is current; the builds before it drain (`openclaw-rl deploy status`)")
    except RuntimeError as exc:
        style.error("deploy", str(exc))
        return 1
    return 0
