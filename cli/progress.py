"""`openclaw-rl users report USER`: a user's progress report as text, and its history as a PNG plot."""

from __future__ import annotations

import time
from pathlib import Path

from contracts.progress import ProgressReport

BAR = 30


def _bar(rate: float, low: float, high: float) -> str:
    """The win rate on a 0-1 line: `=` the interval, `|` one half, `#` the rate."""
    cells = [" "] * (BAR + 1)
    for i in range(round(low * BAR), round(high * BAR) + 1):
        cells[i] = "="
    cells[BAR // 2] = "|"  # one half: no difference
    cells[round(rate * BAR)] = "#"
    return "[" + "".join(cells) + "]"


def verdict(rate: float, low: float, high: float) -> str:
    if low > 0.5:
        return "better"
    if high < 0.5:
        return "worse"
    return "no clear difference"


def render(user: str, report: ProgressReport, history: list[ProgressReport]) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(report.at))
    lines = [
        f"progress of {user}: version {report.served_version} serving, reported {when}",
        f"  {report.judged} of {report.held_out_turns} held-out turns judged pairwise by the {report.judge} judge "
        "(both orders; a win 1, a tie 1/2)",
    ]
    names = {"first": "the first version", "previous": "the previous version", "all": "all earlier versions"}
    for c in report.comparisons:
        against = f"{names[c.against]} (v{c.version})" if c.against != "all" else names["all"]
        bar = _bar(c.win_rate, c.low, c.high)
        lines.append(
            f"  vs {against:<32} win rate {c.win_rate:.2f} [{c.low:.2f}, {c.high:.2f}] {bar} "
            f"{c.wins}W {c.ties}T {c.losses}L of {c.turns}: {verdict(c.win_rate, c.low, c.high)}"
        )
    if report.note:
        lines.append(f"  note: {report.note}")
    for t in report.changed:
        side = "better now" if t.score == 1.0 else "worse now"
        lines += [
            f"  --- turn {t.turn_id} ({side})",
            f"      asked: {_one_line(t.prompt)}",
            f"      v{t.before_version}: {_one_line(t.before)}",
            f"      v{report.served_version}: {_one_line(t.after)}",
        ]
    if len(history) > 1:
        lines.append("  history (win rate vs the first version):")
        for r in reversed(history):
            first = next((c for c in r.comparisons if c.against == "first"), None)
            if first is not None:
                lines.append(f"    v{r.served_version:<6} {first.win_rate:.2f} [{first.low:.2f}, {first.high:.2f}]")
    return "\n".join(lines)


def _one_line(text: str, n: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


def plot(history: list[ProgressReport], path: Path) -> Path | None:
    """The win rate against the first version over the reports, with its intervals; None when there is nothing to
    draw."""
    points = [
        (r.served_version, c.win_rate, c.low, c.high)
        for r in reversed(history)
        for c in r.comparisons
        if c.against == "first"
    ]
    if not points:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2))
    xs = list(range(len(points)))
    rates = [p[1] for p in points]
    ax.errorbar(
        xs, rates, yerr=[[p[1] - p[2] for p in points], [p[3] - p[1] for p in points]], fmt="o-", capsize=3
    )  # fmt: skip
    ax.axhline(0.5, color="grey", linestyle="--", linewidth=1)
    ax.set_xticks(xs, [f"v{p[0]}" for p in points])
    ax.set_ylim(0, 1)
    ax.set_ylabel("win rate vs first version")
    ax.set_title("Did it get better for me? (95% intervals)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
