"""A full data disk takes nothing down: the whole stack (`openclaw-rl up`) with its data directory on a small tmpfs,
six sessions chatting (streamed and not) while training's next checkpoint does not fit, while the disk fills under
turns in flight and while it stays full; then chat again once space is freed, with nothing restarted.

What must hold throughout: valkey never exits (its pid in stack.json is unchanged, no service restarted), no chat
request is answered 500 (a 503 `storage_full` / `store_unavailable` with its reason is fine), and no started stream
is cut (every 200 stream ends with a finish reason and [DONE], or an error event and [DONE]).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import redis

from openclaw_rl.checkpoints import checkpoint_bytes
from tests.api.conftest import chat_stack_env, create_key
from tests.helpers import REPO, RunningStack
from tests.stack.tmpfs import fill, free_bytes, small_tmpfs

pytestmark = pytest.mark.timeout(300)

SESSIONS = 6
SIZE = "512m"
"""Room for the stack's own files and a few of the tiny model's checkpoints (~120-150 MB each)."""
BALLAST = ("ballast", "rest", "full")
PASSING = ("storage_full", "store_unavailable", "temporal_unavailable", "temporal_error")
"""The 503s a full disk may answer with: the store's, or Temporal's (its database is on the same disk)."""


@dataclass
class Outcome:
    """One chat request as the client saw it."""

    stream: bool
    status: int
    code: str | None = None
    message: str = ""
    content: str = ""
    reasoning: str = ""
    finished: bool = False
    """200: the answer ended with a finish reason (and, streamed, [DONE] after it)."""
    turn_id: str = ""
    error_event: dict | None = None
    cut: str | None = None
    """A started stream that ended without [DONE], or with neither a finish reason nor an error event: how."""


@dataclass
class Session:
    key: str
    sid: str
    messages: list[dict] = field(default_factory=list)
    turn: int = 0


def _refused(stream: bool, status: int, text: str) -> Outcome:
    try:
        err = json.loads(text).get("error", {})
    except ValueError:  # not the API's own error body (a 500 from below its error handlers)
        return Outcome(stream, status, None, text)
    return Outcome(stream, status, err.get("code"), err.get("message", ""))


async def _ask(
    http: httpx.AsyncClient,
    s: Session,
    stream: bool,
    max_tokens: int = 12,
    started: asyncio.Event | None = None,
    headers: dict | None = None,
) -> Outcome:
    """One turn of `s`; `started` is set once a stream has sent its first token (or once it is refused)."""
    s.turn += 1
    if len(s.messages) >= 6:  # keep prompts short: a fresh session every few turns
        s.messages, s.sid = [], f"{s.sid.split('~')[0]}~{s.turn}"
    messages = s.messages + [{"role": "user", "content": f"Say something about the number {s.turn}."}]
    body = {"model": "policy", "messages": messages, "max_tokens": max_tokens, "stream": stream}
    headers = {"Authorization": f"Bearer {s.key}", "X-Session-Id": s.sid, **(headers or {})}
    if not stream:
        r = await http.post("/v1/chat/completions", json=body, headers=headers)
        if r.status_code != 200:
            return _refused(False, r.status_code, r.text)
        choice = r.json()["choices"][0]
        s.messages = messages + [{"role": "assistant", "content": choice["message"]["content"] or ""}]
        return Outcome(
            False,
            200,
            turn_id=r.json()["id"].removeprefix("chatcmpl-"),
            content=choice["message"]["content"] or "",
            reasoning=choice["message"].get("reasoning_content") or "",
            finished=bool(choice["finish_reason"]),
        )
    out, events = Outcome(True, 0), []
    try:
        async with http.stream("POST", "/v1/chat/completions", json=body, headers=headers) as r:
            out.status = r.status_code
            if r.status_code != 200:
                return _refused(True, r.status_code, (await r.aread()).decode(errors="replace"))
            try:
                async for line in r.aiter_lines():
                    if line.startswith("data: "):
                        events.append(line[len("data: ") :])
                        if started is not None and '"content":"' in line and '"content":""' not in line:
                            started.set()
            except httpx.HTTPError as exc:
                out.cut = f"{type(exc).__name__}: {exc}"
                return out
    finally:
        if started is not None:
            started.set()
    if not events or events[-1] != "[DONE]":
        out.cut = f"no [DONE] at the end: {events[-2:]}"
        return out
    for event in map(json.loads, events[:-1]):
        if "error" in event:
            out.error_event = event["error"]
            continue
        out.turn_id = event["id"].removeprefix("chatcmpl-")
        for choice in event.get("choices", []):
            out.content += choice["delta"].get("content") or ""
            out.reasoning += choice["delta"].get("reasoning_content") or ""
            out.finished = out.finished or bool(choice.get("finish_reason"))
    if not (out.finished or out.error_event):
        out.cut = "neither a finish reason nor an error event before [DONE]"
    if out.finished:
        s.messages = messages + [{"role": "assistant", "content": out.content}]
    return out


async def _chat(http: httpx.AsyncClient, sessions: list[Session], turns: int, **kw) -> list[Outcome]:
    """`turns` turns on every session at once, streamed and not in turn."""

    async def one(i: int, s: Session) -> list[Outcome]:
        return [await _ask(http, s, stream=(i + t) % 2 == 0, **kw) for t in range(turns)]

    done = await asyncio.gather(*(one(i, s) for i, s in enumerate(sessions)))
    return [o for outs in done for o in outs]


async def _chat_until(http: httpx.AsyncClient, sessions: list[Session], ready, timeout_s: float) -> list[Outcome]:
    """Chat in rounds until `ready()` (or `timeout_s`)."""
    seen: list[Outcome] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        seen += await _chat(http, sessions, 1)
        if ready():
            break
    return seen


def _until_valkey_refuses_writes(stack: RunningStack, timeout_s: float = 10.0) -> None:
    """Valkey finds its disk full at its next write of the append-only file; from then on it refuses writes."""
    r = redis.Redis.from_url(stack.redis)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            r.set("disk-full-probe", "x")
        except redis.ResponseError as exc:
            assert str(exc).startswith("MISCONF"), exc
            return
        assert time.monotonic() < deadline, "valkey still accepts writes on a full disk"
        time.sleep(0.05)


def _training(stack: RunningStack, timeout_s: float = 60.0) -> dict:
    """Training's status; Temporal's own database is on the full disk too, so a query may fail for a while."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return json.loads(stack.cli("train", "status", "--json", timeout=60))
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def _training_until(stack: RunningStack, check, timeout_s: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        status = _training(stack)
        if check(status):
            return status
        assert time.monotonic() < deadline, status
        time.sleep(0.2)


def _summary(outcomes: list[Outcome]) -> Counter:
    return Counter(
        f"{o.status}{'/' + o.code if o.code else ''}{' stream' if o.stream else ''}"
        f"{' error-event:' + str(o.error_event.get('code')) if o.error_event else ''}{' CUT' if o.cut else ''}"
        for o in outcomes
    )


def _assert_no_500_and_no_cut_stream(outcomes: list[Outcome], phase: str) -> None:
    bad = [o for o in outcomes if (o.status != 200 and o.status != 503) or o.cut]
    assert not bad, f"{phase}: {bad[:3]} ({_summary(outcomes)})"
    for o in outcomes:
        if o.status == 503:
            assert o.code in PASSING and o.message, o  # with the reason
        if o.error_event is not None:
            assert o.error_event.get("code") in PASSING and o.error_event.get("message"), o


@pytest.fixture(scope="module")
def disk(tmp_path_factory: pytest.TempPathFactory):
    with small_tmpfs(tmp_path_factory.mktemp("disk-full") / "disk", SIZE) as d:
        yield d


@pytest.fixture(scope="module")
def stack(disk: Path, tiny_model: Path):
    env = chat_stack_env(
        disk,
        tiny_model,
        OPENCLAW_RL_TRAINING__AUTO_START="true",
        OPENCLAW_RL_TRAINING__BATCH_SIZE="2",
        OPENCLAW_RL_TRAINING__WAIT_S="2",
        # A durable checkpoint at every version, and ~100 MiB kept free for the rest: with the ballast below, the
        # next checkpoint does not fit even once the older one is pruned.
        OPENCLAW_RL_TRAINING__CHECKPOINT__EVERY_VERSIONS="1",
        OPENCLAW_RL_TRAINING__CHECKPOINT__DISK_RESERVE_GB="0.1",
        OPENCLAW_RL_LEARNING__METHOD="binary",  # a sample per paired turn, from the heuristic judge's one vote
        OPENCLAW_RL_LEARNING__JUDGE='{"type": "heuristic"}',
        OPENCLAW_RL_LEARNING__PRM_VOTES="1",
        OPENCLAW_RL_API__TEMPORAL_RETRY_S="10",
        OPENCLAW_RL_SESSION__TURNS_PER_RUN="50",
    )
    stack = RunningStack(env).start()
    yield stack
    stack.stop()
    shutil.copytree(disk / "logs", disk.parent / "logs", dirs_exist_ok=True)  # the tmpfs goes with the module


def _free(disk: Path) -> None:
    for name in BALLAST:
        (disk / name).unlink(missing_ok=True)


def test_a_log_line_on_a_full_disk_raises_nothing():
    """A log call whose file's disk is full (stderr on /dev/full) must not raise: the API's own error handlers log,
    and a raising log call turned their answers into bare 500s. Without a tmpfs, so it runs where one cannot be
    mounted too."""
    code = "from openclaw_rl.logs import configure_logging; import structlog; configure_logging(); "
    code += "structlog.get_logger().warning('a line')"
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-c", code], stderr=full, stdout=subprocess.PIPE, cwd=REPO, timeout=60)
    assert done.returncode == 0


async def test_a_full_data_disk_takes_nothing_down(stack: RunningStack, disk: Path, tiny_model: Path):
    try:
        await _a_full_data_disk_takes_nothing_down(stack, disk, tiny_model)
    finally:
        _free(disk)  # the next test shares the stack


async def _a_full_data_disk_takes_nothing_down(stack: RunningStack, disk: Path, tiny_model: Path):
    valkey_pid = stack.service_pid("valkey")
    key = create_key(stack, "alice")
    sessions = [Session(key, f"disk-full-{i}") for i in range(SESSIONS)]
    async with httpx.AsyncClient(base_url=stack.api, timeout=120) as http:
        t0 = time.monotonic()
        warm = await _chat_until(http, sessions, lambda: _training(stack)["version"] >= 1, timeout_s=60)
        assert all(o.status == 200 and o.finished for o in warm), _summary(warm)
        assert _training(stack)["version"] >= 1, "training wrote no checkpoint"
        print(f"\nwarm, a version trained: {_summary(warm)} in {time.monotonic() - t0:.1f} s")

        # 1. Training's next checkpoint does not fit: less room than one. Filled once no checkpoint is being written
        # (one written into the space left would fill the disk to its last byte, Temporal's database with it).
        _training_until(stack, lambda s: s["versions_since_durable"] == 0)
        t0 = time.monotonic()
        fill(disk, leave=checkpoint_bytes(tiny_model) // 2, name="ballast")
        small = await _chat_until(http, sessions, lambda: _training(stack)["paused"], timeout_s=60)
        status = _training(stack)
        print(f"training's checkpoint does not fit: {_summary(small)} in {time.monotonic() - t0:.1f} s; {status}")
        _assert_no_500_and_no_cut_stream(small, "while training's checkpoint did not fit")
        assert status["paused"] and status["pause_reason"], status  # training pauses with the reason, nothing else

        # 2. The disk fills to the last byte under turns in flight, stays full while more come, then is freed.
        t0 = time.monotonic()
        fill(disk, leave=1_000_000, name="rest")
        flags = [asyncio.Event() for _ in sessions]
        in_flight = [
            asyncio.ensure_future(_ask(http, s, stream=i % 2 == 0, max_tokens=200, started=flags[i]))
            for i, s in enumerate(sessions)
        ]
        await asyncio.wait_for(asyncio.gather(*(f.wait() for f in flags[::2])), timeout=30)  # streams have started
        fill(disk, leave=0, name="full")
        assert free_bytes(disk) < 64 * 1024
        await asyncio.to_thread(_until_valkey_refuses_writes, stack)
        while_full = await _chat(http, sessions, 1)
        await asyncio.sleep(max(0.0, 8 - (time.monotonic() - t0)))  # long enough for the activities to give up
        _free(disk)
        in_flight = list(await asyncio.wait_for(asyncio.gather(*in_flight), timeout=120))
        print(f"disk full: in flight {_summary(in_flight)}, new {_summary(while_full)}; {time.monotonic() - t0:.1f} s")
        _assert_no_500_and_no_cut_stream(in_flight, "turns in flight when the disk filled")
        _assert_no_500_and_no_cut_stream(while_full, "while the disk was full")
        assert all(o.code == "storage_full" for o in while_full), _summary(while_full)  # the request is not kept

        # 3. Space freed: chat works again, nothing restarted.
        t0 = time.monotonic()
        after = await _chat(http, sessions, 2)
        print(f"after freeing space: {_summary(after)} in {time.monotonic() - t0:.1f} s")
        assert all(o.status == 200 and o.finished for o in after), _summary(after)
    state = stack.state()
    assert stack.service_pid("valkey") == valkey_pid, "valkey exited"
    assert {n: s["restarts"] for n, s in state["services"].items() if s["restarts"]} == {}
    assert all(s["running"] for s in state["services"].values()), state["services"]


async def test_a_stream_whose_token_reads_fail_still_gets_the_whole_answer(stack: RunningStack, disk: Path):
    """The store goes away mid-stream (valkey killed; the supervisor restarts it): the relay stops reading the
    turn's tokens, waits for the turn (which resumes its generation once the store is back) and sends the rest of
    the answer from its result. Before: the relay's StoreUnavailable escaped `_sse` and cut the response."""
    key = create_key(stack, "bob")
    relay_gave_up = "cannot read the turn's token stream"
    api_log = disk / "logs" / "api.log"
    async with httpx.AsyncClient(base_url=stack.api, timeout=120) as http:
        for attempt in range(3):
            s = Session(key, f"relay-{attempt}")
            idem = {"Idempotency-Key": uuid.uuid4().hex}
            started = asyncio.Event()
            turn = asyncio.ensure_future(_ask(http, s, stream=True, max_tokens=400, started=started, headers=idem))
            await asyncio.wait_for(started.wait(), timeout=30)
            pid = stack.service_pid("valkey")
            os.kill(pid, signal.SIGKILL)
            streamed = await asyncio.wait_for(turn, timeout=120)
            stack.wait_restarted("valkey", pid)
            assert streamed.status == 200 and not streamed.cut and streamed.error_event is None, streamed
            assert streamed.finished, streamed
            # The same request again under its key: the turn's recorded answer, to compare with what was streamed.
            s.turn -= 1
            s.messages = s.messages[:-2]
            again = await _ask(http, s, stream=False, max_tokens=400, headers=idem)
            assert again.status == 200, again
            assert (streamed.reasoning, streamed.content) == (again.reasoning, again.content)
            gave_up = [line for line in api_log.read_text(errors="replace").splitlines() if relay_gave_up in line]
            if any(streamed.turn_id in line for line in gave_up):
                return  # the answer's end came from the turn's result, not from the stream
        pytest.fail("the stream ended before valkey was gone three times; the relay's fallback was never exercised")
