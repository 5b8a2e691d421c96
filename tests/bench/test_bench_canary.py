"""`openclaw-rl bench canary --quick`: the canary benchmark's path in miniature.

Two users with an adapter each and canaries on, a stand-in LLM judge on the real wire format that compares answers
by each user's USER.md, one user's reactions inverted for a version, progress reports, the benchmark's own
measurement. A miniature model (noise): this checks the path, the bookkeeping and the invariants that hold whatever
the model learns, not the targets (docs/evaluation.md has the figures of the full run).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.helpers import REPO, stack_env

pytestmark = pytest.mark.timeout(600)


def test_quick_canary_judges_the_injected_version_and_keeps_the_books(tmp_path):
    env = stack_env(tmp_path / "data")
    out = tmp_path / "out"
    # A run that overstays is told to stop (SIGTERM: the benchmark stops its stack as Ctrl-C does), then killed.
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli", "bench", "canary", "--quick", "--seed", "1", "--out", str(out)],
        env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = proc.communicate(timeout=420)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            stdout, stderr = proc.communicate(timeout=150)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
        raise AssertionError(f"bench canary --quick overstayed 420 s: {stdout[-2000:]}{stderr[-2000:]}") from None
    assert proc.returncode == 0, stdout[-3000:] + stderr[-3000:]
    last = [line for line in stdout.splitlines() if line.startswith("canary: ")]
    assert last and "good versions promoted" in last[-1] and "mismatch p99" in last[-1], stdout[-2000:]

    r = json.loads((out / "results.json").read_text())
    flip, cands = r["flip"], r["candidates"]
    assert flip["bad_version"] is not None and flip["bad_version"] > flip["from_version"]
    injected = [c for c in cands if c["injected"]]
    assert len(injected) == 1 and injected[0]["user"] == r["config"]["bad_user"], cands  # it was judged, not skipped
    for c in cands:
        assert c["verdict"] in ("promoted", "rolled back"), c
        share = r["config"]["share"]
        assert c["turns_served"] <= int(c["turns_while_candidate"] * share + 1e-9), c  # never more than its share
        assert c["evidence"]["turns"] <= c["turns_while_candidate"], c  # judged only turns it took part in
        if c["verdict"] == "rolled back":
            assert c["served_after_decision"] == 0, c  # a rolled-back version serves nobody afterwards
    # The judge found each user's taste in every comparison it was asked for (the system prompt reaches it).
    assert r["judge_calls"]["pairwise"] > 0 and r["judge_calls"]["pairwise_no_taste"] == 0, r["judge_calls"]
    for user, view in r["reports"].items():
        assert view["latest"] and view["latest"]["comparisons"], (user, view)
    for c in r["coverage"]:
        assert 0.0 <= c["low"] <= c["win_rate"] <= c["high"] <= 1.0 and 0.0 <= c["measured"] <= 1.0, c
    assert r["mismatch_p99"] is not None and r["mismatch_p99"] < 1e-2  # on-policy: the CPU gap is ~1e-6
