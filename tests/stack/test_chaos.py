"""`kill -9` of every process of the stack in turn, under a 16-session chat load, with judging and training on.

The real stack (`openclaw-rl up`: Temporal dev server, valkey, the engine, one worker per pool, the API) serves
16 scripted sessions at once, streaming and not, each turn's follow-up pairing the turn before with feedback the
heuristic judge scores; batches of 4 samples make train steps and new weights. Meanwhile each process is killed
with SIGKILL in turn (engine, API, the workflow, policy, judge and trainer workers, valkey, Temporal), and the
test waits for the launcher to bring it back and for turns to be served again before the next kill. Clients
retry connection errors, 5xx and 429 with the same `Idempotency-Key`, as a careful client does.

Once the load stops and judging and training have caught up, what must hold:
  - no request was answered 500 (503 while a dependency is down is expected);
  - retries never made a second turn: each session's audit has exactly the turns its client sent, under the
    turn ids the idempotency keys name;
  - every (session, turn) was published at most once: sample ids unique in the record streams and the JSONL files;
  - every published sample was trained at most once, and every trained sample id is among the published
    (`records/trained.jsonl`, one line per confirmed durable checkpoint; a durable checkpoint after every version
    here, so the trainer's kill loses at most the version in its memory);
  - no streamed token was taken back: a finished stream is exactly the turn's recorded content, one cut off by a
    kill is a prefix of it, and every answer the client got is the recorded one;
  - the engine is back serving the current policy version (its weight version is Redis `oc:policy:version`).
Each restart must also be followed by turns served again (and, for the judge, trainer, valkey and Temporal, by new
judgements or a new train step) within a bound: the system recovers, not only its processes.

Findings, each with its own note below, all fixed: DEAD_KEY (a turn failed for good while the engine restarts, and its
key replayed the failure), TURNS_PER_RUN (a retry after the session continued as new ran the turn twice), and
test_a_slow_restart_never_holds_up_another (the launcher restarted one service at a time).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import redis

from api.idempotency import turn_id_for
from api.session_gateway import session_workflow_id
from contracts.summary import SUMMARY_CHARS
from tests.api.conftest import chat_stack_env, create_key
from tests.helpers import RunningStack
from tests.training.test_training_loop import status

pytestmark = pytest.mark.timeout(660)

SESSIONS = 16
USERS = 2
TURNS_PER_SESSION = 4
MAX_TOKENS = 8
BATCH = 4
KILL_ORDER = (
    "engine",
    "api",
    "worker-workflow",
    "worker-policy",
    "worker-judge",
    "worker-trainer",
    "valkey",
    "temporal",
)
"""The env pool is left alone: no episode runs in this test."""
TURN_DEADLINE_S = 150.0
"""A client gives up on a turn after this long (retries included): the longest outage is a Temporal restart."""
PROGRESS_TURNS = 6
"""Turns that must finish after a restarted process is back before the next kill (the system recovered)."""
DEAD_KEY = "503:policy_unavailable"
"""FINDING (fixed): the generate activity gave up after 5 attempts (~15 s), so a turn running while the engine
restarted for longer (11-40 s on this 2-core machine) failed for good, and every retry with the same Idempotency-Key
got that failure back (Temporal keeps an update's outcome by its id, the key's turn id). Now generate waits out ~90 s
of outage and a key whose turn failed so moves on to a fresh turn id. A turn can still fail if the engine stays away
longer: these clients then look the turn up in the audit and, once it shows `failed`, send the request again under
a new key, as a person pressing "retry" would. Such turns are counted and must all fail with the policy unavailable."""
TURNS_PER_RUN = 12
"""Above the most turns a chaos session makes (4, plus one per dead key), so no session continues as new under the
load (test_a_retry_after_the_session_continued_as_new_returns_the_same_turn checks a retry across a new run)."""
FEEDBACK = ("Thanks, perfect!", "Don't repeat yourself, that was wrong.")


@pytest.fixture(scope="module")
def chaos_stack(tiny_model, tmp_path_factory):
    env = chat_stack_env(
        tmp_path_factory.mktemp("chaos") / "data",
        tiny_model,
        OPENCLAW_RL_TRAINING__AUTO_START="true",
        OPENCLAW_RL_TRAINING__BATCH_SIZE=str(BATCH),
        OPENCLAW_RL_TRAINING__WAIT_S="2",
        OPENCLAW_RL_TRAINING__LR="3e-4",
        OPENCLAW_RL_TRAINING__HEARTBEAT_TIMEOUT_S="10",  # a killed trainer's step is retried sooner
        OPENCLAW_RL_TRAINING__CHECKPOINT__EVERY_VERSIONS="1",
        OPENCLAW_RL_LEARNING__METHOD="binary",
        OPENCLAW_RL_LEARNING__JUDGE='{"type": "heuristic"}',
        OPENCLAW_RL_LEARNING__PRM_VOTES="1",  # the heuristic judge is deterministic
        OPENCLAW_RL_SESSION__DEFAULT_MAX_TOKENS=str(MAX_TOKENS),
        OPENCLAW_RL_SESSION__GENERATE_HEARTBEAT_S="3",  # a killed policy worker's generation moves on sooner
        OPENCLAW_RL_TEMPORAL__HEADLESS="true",
        OPENCLAW_RL_SESSION__TURNS_PER_RUN=str(TURNS_PER_RUN),
    )
    stack = RunningStack(env).start()
    yield stack
    stack.stop()


@dataclass
class Turn:
    user: str
    session_id: str
    index: int
    key: str
    stream: bool
    attempts: list[tuple[str, str, bool]] = field(default_factory=list)
    """Each streamed attempt: its key, the content as the client received it, whether the stream finished."""
    dead_keys: list[str] = field(default_factory=list)
    """Keys whose turn failed for good (see DEAD_KEY): the request was sent again under a new key."""
    content: str | None = None
    """The answer the client finally got."""
    response_id: str | None = None


class Load:
    """16 scripted sessions over 2 users; each client retries like a careful OpenAI client with an idempotency key."""

    def __init__(self, stack: RunningStack, keys: dict[str, str]):
        self.stack, self.keys = stack, keys
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.statuses: Counter[str] = Counter()
        self.turns: list[Turn] = []
        self.sessions: dict[str, list[Turn]] = {}
        self.failures: list[str] = []
        self.dead: list[tuple[str, str]] = []
        self.phase = "start"
        """The process killed last (turns failed for good are put down to it)."""
        self.done = 0

    def finished(self) -> int:
        with self.lock:
            return self.done

    def run_slot(self, slot: int) -> None:
        user = list(self.keys)[slot % USERS]
        http = httpx.Client(base_url=self.stack.api, timeout=httpx.Timeout(120.0, connect=5.0))
        n = 0
        try:
            while not self.stop.is_set():
                n += 1
                sid = f"chaos-{slot}-{n}"
                history: list[dict] = []
                question = f"Slot {slot}, session {n}: tell me something about rivers."
                for t in range(TURNS_PER_SESSION):
                    if self.stop.is_set():
                        break
                    history.append({"role": "user", "content": question})
                    turn = Turn(user, sid, t, f"{sid}/{t}/{uuid.uuid4().hex}", stream=(slot + t) % 2 == 0)
                    with self.lock:
                        self.turns.append(turn)
                        self.sessions.setdefault(sid, []).append(turn)
                    if not self._complete(http, turn, history):
                        return
                    with self.lock:
                        self.done += 1
                    history.append({"role": "assistant", "content": turn.content})
                    question = f"{FEEDBACK[(slot + t) % 2]} Next, question {t + 1}."
        finally:
            http.close()

    def _complete(self, http: httpx.Client, turn: Turn, history: list[dict]) -> bool:
        body = {"messages": history, "max_tokens": MAX_TOKENS, "temperature": 0.8, "stream": turn.stream}
        headers = {
            "Authorization": f"Bearer {self.keys[turn.user]}",
            "X-Session-Id": turn.session_id,
            "Idempotency-Key": turn.key,
        }
        deadline = time.monotonic() + TURN_DEADLINE_S
        while time.monotonic() < deadline:
            try:
                outcome = (self._stream if turn.stream else self._plain)(http, body, headers, turn)
            except httpx.TransportError as exc:  # the API died or restarts: connection refused, reset, cut off
                outcome = f"transport:{type(exc).__name__}"
            with self.lock:
                self.statuses[outcome] += 1
            if outcome == "200":
                return True
            if outcome.endswith(DEAD_KEY) and self._turn_failed(turn):
                with self.lock:
                    self.dead.append((self.phase, f"{turn.session_id}#{turn.index}"))
                turn.dead_keys.append(turn.key)
                turn.key = headers["Idempotency-Key"] = f"{turn.session_id}/{turn.index}/{uuid.uuid4().hex}"
                continue
            if outcome.startswith(("4", "sse:4")) and not outcome.startswith(("429:", "sse:429:")):
                with self.lock:
                    self.failures.append(f"{turn.session_id}#{turn.index}: {outcome}")
                return False
            time.sleep(0.5)
        with self.lock:
            self.failures.append(f"{turn.session_id}#{turn.index}: no answer in {TURN_DEADLINE_S:.0f}s")
        return False

    def _turn_failed(self, turn: Turn) -> bool:
        """Whether the key's turn ran and failed (its record says so), rather than not having run yet."""
        try:
            log = _audit(self.stack, self.keys[turn.user], turn.session_id)
        except (AssertionError, httpx.HTTPError):
            return False
        tid = turn_id_for(turn.user, turn.key)
        return any(t["turn_id"] == tid and t["status"] == "failed" for t in log["turns"])

    @staticmethod
    def _plain(http: httpx.Client, body: dict, headers: dict, turn: Turn) -> str:
        r = http.post("/v1/chat/completions", json=body, headers=headers)
        if r.status_code != 200:
            return f"{r.status_code}:{_code(r)}"
        out = r.json()
        turn.content = out["choices"][0]["message"].get("content") or ""
        turn.response_id = out["id"]
        return "200"

    @staticmethod
    def _stream(http: httpx.Client, body: dict, headers: dict, turn: Turn) -> str:
        text, finished = "", False
        try:
            with http.stream("POST", "/v1/chat/completions", json=body, headers=headers) as r:
                if r.status_code != 200:
                    r.read()
                    return f"{r.status_code}:{_code(r)}"
                for line in r.iter_lines():
                    if not line.startswith("data: "):
                        continue
                    data = line[len("data: ") :]
                    if data == "[DONE]":
                        break
                    chunk = json.loads(data)
                    if "error" in chunk:
                        err = chunk["error"]
                        return f"sse:{_status_of(err.get('type'))}:{err.get('code')}"
                    turn.response_id = chunk["id"]
                    for choice in chunk["choices"]:
                        text += choice["delta"].get("content") or ""
                        finished = finished or choice.get("finish_reason") is not None
        finally:
            turn.attempts.append((turn.key, text, finished))
        if not finished:
            return "sse:cut-off"
        turn.content = text
        return "200"


def _code(r: httpx.Response) -> str:
    try:
        return str(r.json()["error"].get("code"))
    except (ValueError, KeyError, TypeError, AttributeError):
        return r.text[:60]


def _status_of(error_type: str | None) -> str:
    from api.errors import _TYPES

    return next((str(s) for s, t in _TYPES.items() if t == error_type), "500")


def _pid(stack: RunningStack, name: str) -> int:
    return stack.service_pid(name)


def _wait(what: str, check, timeout: float, every: float = 0.5, load: Load | None = None):
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = check()
        except (redis.RedisError, httpx.HTTPError, AssertionError):  # a store or service still coming back
            got = None
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f}s waiting for {what}" + (
            f"; answers so far: {dict(load.statuses)}; failures: {load.failures[:5]}" if load else ""
        )
        time.sleep(every)


def _await_train_activity(stack: RunningStack, timeout: float = 60.0) -> str:
    """Wait until the trainer is inside a train step or a weight publication, so the kill lands mid-work."""
    from temporalio.client import Client

    async def poll() -> str:
        client = await Client.connect(stack.temporal)
        handle = client.get_workflow_handle("training/openclaw-rl-policy")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            desc = await handle.describe()
            for pa in desc.raw_description.pending_activities:
                if pa.activity_type.name in ("train_step", "publish_version", "publish_weights"):
                    return f" (killed in {pa.activity_type.name})"
            await asyncio.sleep(0.05)
        return " (no step in flight when killed)"

    return asyncio.run(poll())


def _redis_version(stack: RunningStack) -> str:
    try:
        return (redis.Redis.from_url(stack.redis).get("oc:policy:version") or b"0").decode()
    except redis.RedisError:
        return "?"


def _engine_version(stack: RunningStack) -> str:
    try:
        return str(httpx.get(f"{stack.engine}/get_weight_version", timeout=5).json()["weight_version"])
    except httpx.HTTPError:
        return "!"


def _engine_serves_current(stack: RunningStack) -> bool:
    """The engine answers with the version Redis names (no label is the base model, version 0)."""
    engine, current = _engine_version(stack), _redis_version(stack)
    return engine not in ("!", "?") and (engine if engine not in ("", "None") else "0") == current


def _published(stack: RunningStack) -> tuple[list[dict], list[str]]:
    """Every judged-turn record in the record streams, and the sample ids of the JSONL mirrors."""
    r = redis.Redis.from_url(stack.redis)
    records = [json.loads(f[b"record"]) for key in r.scan_iter("oc:records:personal:v*") for _, f in r.xrange(key)]
    jsonl = [
        json.loads(line)["sample_id"]
        for path in (stack.data_dir / "records").glob("policy-*/personal.jsonl")
        for line in path.read_text().splitlines()
        if line.strip()
    ]
    return records, jsonl


def _trained_log(stack: RunningStack) -> list[dict]:
    path = stack.data_dir / "records" / "trained.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def _trained(stack: RunningStack) -> list[dict]:
    return [line for line in _trained_log(stack) if not line.get("dropped")]


def _dropped_stale(stack: RunningStack) -> list[str]:
    """The ids of the samples dropped as too stale, from the log: the lines of the steps that trained, and those of
    the batches that made no version (`"dropped": true`)."""
    return [i for line in _trained_log(stack) for i in line.get("stale_ids", [])]


def _audit(stack: RunningStack, key: str, sid: str) -> dict:
    r = httpx.get(
        f"{stack.api}/v1/sessions/{sid}/turns",
        params={"limit": 100},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    return r.json()


def _drained(stack: RunningStack, paired: set[tuple[str, int]]) -> bool:
    """Judging caught up (every paired turn has its record) and training too (less than a batch left, no step)."""
    records, _ = _published(stack)
    judged = {(rec["sample_id"].split("@")[0], int(rec["sample_id"].rsplit("#", 1)[1])) for rec in records}
    if not paired <= judged:
        return False
    r = redis.Redis.from_url(stack.redis)
    s = status(stack)
    return (
        r.xlen("oc:samples:personal") < BATCH
        and s["waiting_samples"] < BATCH
        and s["versions_since_durable"] == 0  # every version trained is in a confirmed durable checkpoint
        and _engine_serves_current(stack)
    )


def test_kill_9_of_each_process_in_turn_under_load(chaos_stack):
    stack = chaos_stack
    t0 = time.monotonic()
    keys = {f"chaos{u}": create_key(stack, f"chaos{u}") for u in range(USERS)}
    load = Load(stack, keys)
    threads = [threading.Thread(target=load.run_slot, args=(i,), daemon=True) for i in range(SESSIONS)]
    for th in threads:
        th.start()
    timeline: list[str] = []
    try:
        _wait("the first turns", lambda: load.finished() >= SESSIONS, 120, load=load)
        for name in KILL_ORDER:
            assert not load.failures, load.failures[:5]
            old = _pid(stack, name)
            before = load.finished()
            steps, judged = status(stack)["steps"], len(_published(stack)[0])
            aimed = _await_train_activity(stack) if name == "worker-trainer" else ""
            load.phase = name
            os.kill(old, signal.SIGKILL)
            k = time.monotonic()
            stack.wait_restarted(name, old, timeout=120)
            back = time.monotonic() - k
            _wait(f"turns after {name} came back", lambda: load.finished() >= before + PROGRESS_TURNS, 150, load=load)
            if name == "engine":  # restarted on the newest checkpoint, not the base model as version 0
                _wait("the restarted engine to serve the current version", lambda: _engine_serves_current(stack), 90)
            served = time.monotonic() - k
            if name == "worker-trainer":  # the step it was killed in is retried and training goes on
                # 240 s: the judge's backlog from its own restart can land now, turns of versions the trainer has
                # left more than max_staleness behind. Those were dropped 4 a step (4 s a batch on a loaded machine:
                # the next step came 132 s after the trainer was back in a 2026-11-28 fresh clone); the claim now
                # drops them as it reads them (activities/stale_screen.py). A bound, not a speed target.
                _wait("a train step after the trainer came back", lambda: status(stack)["steps"] > steps, 240, 1)
            if name in ("worker-judge", "valkey", "temporal"):
                _wait(f"judging after {name} came back", lambda: len(_published(stack)[0]) > judged, 120, 1)
            timeline.append(
                f"{name}{aimed}: back in {back:.1f}s, turns served again after {served:.1f}s, "
                f"learning again after {time.monotonic() - k:.1f}s"
            )
    finally:
        load.stop.set()
        for th in threads:
            th.join(timeout=TURN_DEADLINE_S + 30)
    print("\n" + "\n".join(timeline))
    assert not load.failures, load.failures[:5]
    assert not [th for th in threads if th.is_alive()], "a client never finished its turn"
    statuses = dict(load.statuses)
    print(f"answers: {statuses}; turns: {len(load.turns)}, sessions: {len(load.sessions)}")
    assert not [s for s in statuses if s.startswith(("500", "sse:500"))], statuses

    # ---- the audit: one turn per request sent, under the key's turn id, with the content the client got ----
    paired: set[tuple[str, int]] = set()
    for sid, turns in load.sessions.items():
        user = turns[0].user
        log = _audit(stack, keys[user], sid)
        main = [t for t in log["turns"] if t["turn_type"] == "main"]
        sent_keys = [(sent, k, k in sent.dead_keys) for sent in turns for k in sent.dead_keys + [sent.key]]
        assert log["total"] == len(sent_keys) == len(main), (
            sid,
            [(k, turn_id_for(user, k), dead) for _, k, dead in sent_keys],
            [(t["index"], t["turn_id"], t["status"], t["error"]) for t in log["turns"]],
        )
        wf = session_workflow_id(user, sid)
        for (sent, key, dead), rec in zip(sent_keys, main):
            assert rec["turn_id"] == turn_id_for(user, key), (sid, sent.index)
            if dead:  # see DEAD_KEY: the turn failed, and no stream of it ever finished
                assert rec["status"] == "failed", (sid, sent.index, rec)
                assert not [a for a in sent.attempts if a[0] == key and a[2]], (sid, sent.index)
                continue
            assert rec["status"] == "done" and sent.response_id == f"chatcmpl-{rec['turn_id']}", (sid, sent.index)
            recorded = rec["response_summary"]
            whole = len(recorded) < SUMMARY_CHARS
            assert sent.content is not None
            assert sent.content == recorded if whole else recorded.startswith(sent.content[: SUMMARY_CHARS - 1])
            for k, text, finished in sent.attempts:  # nothing a stream showed was ever taken back
                if k != key:
                    continue
                if finished:
                    assert text == sent.content, (sid, sent.index, text, sent.content)
                else:
                    assert sent.content.startswith(text), (sid, sent.index, text, sent.content)
            if rec["next_state_status"] == "paired":
                paired.add((wf, rec["index"]))
    cut = sum(1 for t in load.turns for _, _, finished in t.attempts if not finished)
    print(
        f"streams cut off by a kill and resumed by a retry: {cut}; paired turns: {len(paired)}; "
        f"turns failed for good (DEAD_KEY), by the process killed: {dict(Counter(p for p, _ in load.dead))}"
    )
    assert {p for p, _ in load.dead} <= {"engine"}, load.dead

    # ---- drained: judges and training caught up ----
    # A bound for the backlog to drain, not a speed target: with another test file beside this one on 2 cores
    # (make test's two workers) the judges and the trainer take longer than alone.
    _wait("judging and training to catch up", lambda: _drained(stack, paired), 300, every=2)

    records, jsonl = _published(stack)
    ids = [rec["sample_id"] for rec in records]
    dup = [i for i, c in Counter(ids).items() if c > 1]
    assert not dup, f"published more than once: {dup[:5]}"
    turns_of = Counter((i.split("@")[0], i.rsplit("#", 1)[1]) for i in ids)
    assert max(turns_of.values(), default=1) == 1, "a (session, turn) was published under two sample ids"
    assert len(jsonl) == len(set(jsonl)), "a JSONL record was written twice"
    assert set(jsonl) <= set(ids)
    published = {rec["sample_id"] for rec in records if rec["result"]["published"]}

    steps = _trained(stack)
    s = status(stack)
    assert len({st["version"] for st in steps}) == len(steps), "one version recorded by two durable lines"
    trained = [i for st in steps for i in st["sample_ids"]]
    twice = [i for i, c in Counter(trained).items() if c > 1]
    assert not twice, f"trained more than once: {twice[:5]}"
    assert set(trained) <= published, f"trained but never published: {sorted(set(trained) - published)[:5]}"
    assert len(trained) == s["samples_trained"], (len(steps), len(trained), s)  # lost versions count once
    assert s["steps"] >= 3, f"too few train steps to mean anything: {s}"

    # ---- the engine serves the current policy version ----
    assert _engine_version(stack) == _redis_version(stack) == str(s["version"]), (
        _engine_version(stack),
        _redis_version(stack),
        s["version"],
    )
    left = redis.Redis.from_url(stack.redis).xlen("oc:samples:personal")
    dropped = {
        "stale": s["samples_dropped_stale"],
        "bad": s["samples_dropped_bad"],
        "missing": s["samples_dropped_missing"],
    }
    report = {
        "processes_killed": list(KILL_ORDER),
        "recovery": timeline,
        "turns_served": len(load.turns),
        "answers_by_status": statuses,
        "streams_cut_and_resumed": cut,
        "turns_failed_for_good": len(load.dead),
        "samples_published": len(published),
        "samples_judged": len(ids),
        "samples_trained": len(trained),
        "train_steps": len(steps),
        "samples_dropped": dropped,
        "samples_left_in_stream": left,
        "samples_waiting_for_a_batch": s["waiting_samples"],
        "unaccounted": len(published) - len(trained) - sum(dropped.values()) - left,
        "dropped_stale_named_on_disk": len(set(_dropped_stale(stack))),
        "duplicated_published": len(dup),
        "trained_twice": len(twice),
        "policy_version": s["version"],
        "took_s": round(time.monotonic() - t0),
    }
    print(
        f"published {len(published)} samples ({len(ids)} records, {len(set(ids) - set(jsonl))} not yet mirrored "
        f"to JSONL), trained {len(trained)} in {len(steps)} steps, policy v{s['version']}"
    )
    print("chaos: " + json.dumps(report))
    if os.environ.get("CHAOS_REPORT"):  # docs/reliability.md's figures: one command writes them
        Path(os.environ["CHAOS_REPORT"]).write_text(json.dumps(report, indent=1) + "\n")
    # Lost: a published sample neither trained, nor dropped with its reason, nor still waiting in its stream.
    assert report["unaccounted"] == 0, report
    # Every stale drop is named on disk, not only counted (a batch of stale samples makes no version but a line).
    stale_named = set(_dropped_stale(stack))
    assert len(stale_named) == dropped["stale"] and stale_named <= published and not stale_named & set(trained), report


def _child(parent: int, word: str, other_than: int) -> int | None:
    """A child process of `parent` whose command line has `word`, other than pid `other_than`."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == other_than:
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent and word.encode() in cmdline:
            return int(entry)
    return None


def test_a_slow_restart_never_holds_up_another(chaos_stack):
    """FINDING, fixed in stack/launcher.py: the supervisor restarted dead services one at a time and waited for each
    to be ready, so while an engine loaded (minutes for a real checkpoint; `engine` may take 900 s to be ready) an API
    or a store that died meanwhile stayed down. Here the restarted engine is frozen mid-start; the API killed then must
    still come back at once."""
    stack = chaos_stack
    launcher = stack.proc.pid
    old_engine = stack.service_pid("engine")
    os.kill(old_engine, signal.SIGKILL)
    engine = _wait("the engine restarting", lambda: _child(launcher, "engine", old_engine), 60, every=0.02)
    os.kill(engine, signal.SIGSTOP)  # its /health never answers: its restart is not over until SIGCONT
    try:
        old_api = stack.service_pid("api")
        os.kill(old_api, signal.SIGKILL)
        stack.wait_restarted("api", old_api, timeout=60)
        assert httpx.get(f"{stack.api}/healthz", timeout=10).status_code == 200
        assert stack.state()["services"]["engine"]["pid"] == engine
    finally:
        os.kill(engine, signal.SIGCONT)
    _wait("the engine back", lambda: _engine_version(stack) != "!", 120)
    _wait("the engine serving the current version", lambda: _engine_serves_current(stack), 60)


def test_a_retry_after_the_session_continued_as_new_returns_the_same_turn(chaos_stack):
    """Temporal dedupes an update id only within one workflow run. A retry whose first copy ran the turn but never
    kept its result under the Idempotency-Key (the API killed, or the store failing, before idempotency.save_result)
    and that arrives after the session continued as new used to start a second turn with the same turn id (seen
    under the chaos load with turns_per_run=5). The API now finds the finished turn in the audit and answers it."""
    stack = chaos_stack
    user, sid = "roller", f"roller-{uuid.uuid4().hex[:6]}"
    key = create_key(stack, user)
    headers = {"Authorization": f"Bearer {key}", "X-Session-Id": sid}
    history: list[dict] = []
    with httpx.Client(base_url=stack.api, timeout=120) as http:
        for t in range(TURNS_PER_RUN):  # the last one fills the run: the session continues as new after it
            history.append({"role": "user", "content": f"{FEEDBACK[t % 2]} Question {t}."})
            body = {"messages": list(history), "max_tokens": MAX_TOKENS}
            r = http.post("/v1/chat/completions", json=body, headers=headers | {"Idempotency-Key": f"{sid}/{t}"})
            assert r.status_code == 200, r.text
            history.append({"role": "assistant", "content": r.json()["choices"][0]["message"]["content"] or ""})
        first = r.json()
        # The API died after the turn ran, before it kept the result under the key: what a kill -9 leaves behind.
        store = redis.Redis.from_url(stack.redis)
        record_key = f"oc:idempotency:{turn_id_for(user, f'{sid}/{TURNS_PER_RUN - 1}')}"
        record = json.loads(store.get(record_key))
        store.set(record_key, json.dumps(record | {"result": None}), ex=3600)
        _wait("the session to continue as new", lambda: _audit(stack, key, sid)["runs"] >= 2, 60)
        again = http.post(
            "/v1/chat/completions", json=body, headers=headers | {"Idempotency-Key": f"{sid}/{TURNS_PER_RUN - 1}"}
        )
    assert again.status_code == 200, again.text
    log = _audit(stack, key, sid)
    assert log["total"] == TURNS_PER_RUN, [(t["index"], t["turn_id"]) for t in log["turns"]][-3:]
    assert again.json()["choices"] == first["choices"]
