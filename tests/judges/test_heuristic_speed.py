"""The heuristic judge stays linear in the size of what it reads.

A tool result can be megabytes (a dumped file, a base64 blob, a minified bundle). A pattern that backtracks
over a long run of word characters is quadratic there: 20 KB took 1.6-2.7 s, so 1 MB would hold a judge worker
for about an hour. The timeout turns such a regression into a failure instead of a hung test run.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from judges.base import JudgeContext, StepJudgeContext, StepView
from judges.heuristic import HeuristicJudge
from rlmath.signals import parse_boxed, parse_hint_vote

MB = 1_000_000
# Hex digits only: no letter run can spell "error", "failed", ... by chance, so the verdict depends on the marker.
BLOB = "0123456789abcdef" * (MB // 2 // 16)
LOG = "".join(f"INFO step {i} processed 42 items in 3 ms\n" for i in range(MB // 2 // 40))
ERROR_TAIL = '\nTraceback (most recent call last):\n  File "x.py", line 1, in <module>\nValueError: boom\n'


def big_result(with_error: bool, plain_ascii: bool = True) -> str:
    # One 500 KB line (the worst case for a pattern that backtracks over \w*) and 500 KB of ordinary log lines;
    # one non-ASCII character sends the whole text down the judge's re.IGNORECASE path.
    text = BLOB + "\n" + LOG + ("exit code 0\n" if plain_ascii else "exit code 0, café\n")
    return text + ERROR_TAIL if with_error else text


def timed(fn):
    started = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - started


@pytest.mark.timeout(30)
@pytest.mark.parametrize("plain_ascii", [True, False])
@pytest.mark.parametrize("with_error, score", [(False, 1), (True, -1)])
def test_a_1mb_tool_result_is_judged_in_well_under_a_second(with_error, score, plain_ascii):
    judge = HeuristicJudge()
    ctx = JudgeContext(
        response="Running it.", next_state_role="tool", next_state=big_result(with_error, plain_ascii), previous_user=""
    )
    assert len(ctx.next_state) >= MB
    raw, took = timed(lambda: asyncio.run(judge.prm(ctx)))
    print(f"prm on {len(ctx.next_state)} chars, error={with_error}, ascii={plain_ascii}: {took:.3f} s")
    assert parse_boxed(raw) == score
    assert took < 1.0

    vote, took = timed(lambda: parse_hint_vote(asyncio.run(judge.hint(ctx))))
    print(f"hint on {len(ctx.next_state)} chars, error={with_error}, ascii={plain_ascii}: {took:.3f} s")
    assert took < 1.0
    assert vote.score == (1 if with_error else -1)
    if with_error:
        assert "ValueError: boom" in vote.hint


@pytest.mark.timeout(30)
@pytest.mark.parametrize("with_error, score", [(False, 1), (True, -1)])
def test_a_1mb_step_tool_result_is_judged_in_well_under_a_second(with_error, score):
    step = StepView(
        turn_idx=0,
        assistant_text="",
        tool_calls='[{"name": "bash", "arguments": {"command": "cat dump"}}]',
        tool_results=big_result(with_error),
        parse_error=None,
        errors=0,
    )
    ctx = StepJudgeContext(setting="terminal", task_instruction="t", history=[], current=step)
    (got, _), took = timed(lambda: HeuristicJudge().step_score(ctx))
    print(f"step_score on {len(step.tool_results)} chars, error={with_error}: {took:.3f} s")
    assert got == score
    assert took < 1.0


@pytest.mark.timeout(30)
def test_a_1mb_user_reply_is_judged_in_well_under_a_second():
    reply = BLOB + " " + "and what about this part " * (MB // 2 // 25) + "\nThat's wrong, you should use metres."
    ctx = JudgeContext(response="Here.", next_state_role="user", next_state=reply, previous_user="something else")
    raw, took = timed(lambda: asyncio.run(HeuristicJudge().prm(ctx)))
    print(f"prm on a {len(reply)}-char user reply: {took:.3f} s")
    assert parse_boxed(raw) == -1
    assert took < 1.0
