"""Learning, not only running: users who correct one behaviour of the tiny model make it rarer.

The tiny model's recognisable habit: at a low temperature it often says the
same token twice in a row (its tied embeddings make the last token the likeliest
next one). Scripted users chat with it through the endpoint and, like a person
would, say "Don't repeat yourself" when a reply repeats a token and "Thanks,
perfect" when it does not. The heuristic judge turns that into +-1 (`binary`),
and the TrainingWorkflow trains on the samples while the users keep chatting.
The habit's rate, measured on fresh prompts straight from the engine before and
after, must fall by a margin sampling noise cannot produce.
"""

from __future__ import annotations

import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.api.conftest import chat_stack_env, create_key
from tests.helpers import RunningStack
from tests.training.test_training_loop import status

pytestmark = pytest.mark.timeout(900)

TEMPERATURE = 0.1
"""Where about half the tiny model's 8-token replies repeat a token: the most informative rate for +-1 rewards."""
TARGET_VERSION = 20
TURNS_PER_SESSION = 8
USERS = 3
EVAL_PROMPTS = 384
"""Each rate's standard error is ~0.025 (~0.044 at 128 prompts, where one CI run measured a 0.23 fall at z 3.95):
the measurement's noise should not decide the test, the training should."""


@pytest.fixture(scope="module")
def learning_stack(tiny_model, tmp_path_factory):
    env = chat_stack_env(
        tmp_path_factory.mktemp("learning") / "data",
        tiny_model,
        OPENCLAW_RL_TRAINING__AUTO_START="true",
        OPENCLAW_RL_TRAINING__WAIT_S="2",
        OPENCLAW_RL_TRAINING__LR="3e-4",  # the tiny model's rate (the paper's 1e-5 is for 4B-32B models)
        OPENCLAW_RL_LEARNING__METHOD="binary",
        OPENCLAW_RL_LEARNING__PRM_VOTES="1",  # the heuristic judge is deterministic: three votes would agree
        OPENCLAW_RL_SESSION__DEFAULT_MAX_TOKENS="8",
        OPENCLAW_RL_SESSION__TURNS_PER_RUN="50",
    )
    stack = RunningStack(env).start()
    yield stack
    stack.stop()


class Habit:
    """The scripted user's eye: does a reply, as the tokenizer reads it, say the same token twice in a row?"""

    def __init__(self, model_dir):
        from transformers import AutoTokenizer

        self.tok = AutoTokenizer.from_pretrained(model_dir)

    def repeats(self, text: str) -> bool:
        ids = self.tok.encode(text, add_special_tokens=False)
        return any(a == b for a, b in zip(ids, ids[1:]))

    def prompt(self, question: str) -> str:
        return self.tok.apply_chat_template(
            [{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True
        )


def habit_rate(stack: RunningStack, habit: Habit, round_: str) -> tuple[float, int]:
    """The habit's rate on fresh one-turn prompts, sampled by the engine itself (no chat, no judging)."""

    def one(i: int) -> bool:
        body = {
            "text": habit.prompt(f"Tell me about {round_} subject number {i}."),
            "sampling_params": {"max_new_tokens": 8, "temperature": TEMPERATURE},
        }
        r = httpx.post(f"{stack.engine}/generate", json=body, timeout=120)
        r.raise_for_status()
        return habit.repeats(r.json()["text"])

    with ThreadPoolExecutor(8) as pool:
        hits = list(pool.map(one, range(EVAL_PROMPTS)))
    return sum(hits) / len(hits), len(hits)


def test_users_correcting_a_habit_make_the_policy_drop_it(learning_stack, tiny_model):
    stack = learning_stack
    habit = Habit(tiny_model)
    before, n = habit_rate(stack, habit, "baseline")
    assert 0.2 <= before <= 0.8, f"the tiny model's habit rate is {before}: the test needs a measurable one"

    stop = threading.Event()
    seen: list[tuple[str, bool]] = []  # (policy version that replied, habit shown)
    errors: list[str] = []

    def user(name: str) -> None:
        key = create_key(stack, name)
        session = 0
        while not stop.is_set():
            session += 1
            history: list[dict] = []
            question = f"{name} asks question {session}.0"
            for t in range(TURNS_PER_SESSION):
                history.append({"role": "user", "content": question})
                r = httpx.post(
                    f"{stack.api}/v1/chat/completions",
                    json={"messages": history, "max_tokens": 8, "temperature": TEMPERATURE},
                    headers={"Authorization": f"Bearer {key}", "X-Session-Id": f"{name}-{session}"},
                    timeout=120,
                )
                if r.status_code != 200:
                    errors.append(r.text)
                    return
                body = r.json()
                text = body["choices"][0]["message"]["content"] or ""
                bad = habit.repeats(text)
                seen.append((body.get("system_fingerprint") or "?", bad))
                history.append({"role": "assistant", "content": text})
                feedback = "Don't repeat yourself, you said the same thing twice." if bad else "Thanks, perfect!"
                question = f"{feedback} Next, question {session}.{t + 1}"
                if stop.is_set():
                    break

    threads = [threading.Thread(target=user, args=(f"user{i}",), daemon=True) for i in range(USERS)]
    for th in threads:
        th.start()
    deadline = time.monotonic() + 720
    try:
        while status(stack)["version"] < TARGET_VERSION:
            assert time.monotonic() < deadline, f"training too slow: {status(stack)}"
            assert not errors, errors[:3]
            time.sleep(2)
    finally:
        stop.set()
        for th in threads:
            th.join(timeout=120)
    assert not errors, errors[:3]

    after, m = habit_rate(stack, habit, "final")
    s = status(stack)
    # Two-proportion z-test: how many standard errors the fall is.
    pooled = (before * n + after * m) / (n + m)
    z = (before - after) / math.sqrt(pooled * (1 - pooled) * (1 / n + 1 / m))
    online = {v: [b for ver, b in seen if ver == v] for v in {ver for ver, _ in seen}}
    report = ", ".join(
        f"v{v}: {sum(b) / len(b):.2f} of {len(b)}"
        for v, b in sorted(online.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else -1)
    )
    print(
        f"\nhabit rate before {before:.3f}, after {after:.3f} (n={n}, {m}), z={z:.1f}; "
        f"steps {s['steps']}, trained {s['samples_trained']}, stale {s['samples_dropped_stale']}\n"
        f"per serving version: {report}"
    )
    assert after <= before - 0.2, (before, after, report)
    assert z >= 4.0, (before, after, z)
