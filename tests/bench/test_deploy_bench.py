"""`openclaw-rl bench deploy`, short: a build whose workflow code old histories cannot replay is rolled out under
chat and rollout load. With Worker Versioning nothing fails and the sessions open on the old build finish on it;
without it (today's restart onto the new code) the open histories meet the new code and fail, which is what the
benchmark must be able to see."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.helpers import REPO

LINE = re.compile(
    r"^(versioned|unversioned)\s+(\d+) turns,\s+(\d+) episode steps .* non-determinism errors (\d+), failed turns "
    r"(\d+); sessions open on A that finished on it (\d+)/(\d+); A (\S+)$"
)


def test_a_versioned_roll_out_breaks_nothing_and_an_unversioned_one_is_seen_to(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "cli", "bench", "deploy", "--sessions", "2", "--before", "3", "--after", "3",
         "--rollout-tasks", "2", "--turn-timeout-s", "5"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    rows = {m[1]: m.groups()[1:] for line in out.stdout.splitlines() if (m := LINE.match(line))}
    assert set(rows) == {"versioned", "unversioned"}, out.stdout
    turns, steps, nde, failed, on_a, old, drainage = rows["versioned"]
    assert int(turns) > 0 and int(steps) > 0
    assert (int(nde), int(failed)) == (0, 0) and on_a == old == "2" and drainage == "drained", out.stdout
    _, _, nde, failed, on_a, _, _ = rows["unversioned"]
    assert int(nde) > 0 and on_a == "0", out.stdout
    assert re.search(r"^deploy: \d+ turns, \d+ episode steps during the roll-out, non-determinism errors 0, "
                     r"failed turns 0, sessions on old build finished on it 2/2$", out.stdout, re.M)  # fmt: skip
