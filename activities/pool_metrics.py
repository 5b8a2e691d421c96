"""The pools' own Prometheus metrics, recorded from activities through the SDK's metric meter.

A pool started with `metrics.port_base` serves them with the SDK's (workers.main); without it the meter is a
no-op. Names are what deploy/grafana's dashboard queries (checked in a test)."""

from __future__ import annotations

import contextlib

import structlog
from temporalio import activity
from temporalio.common import MetricMeter

from contracts.training import StepMetrics, StepSummary

log = structlog.get_logger(__name__)


@contextlib.contextmanager
def _never_fails():
    """A metric is never worth failing the activity that records it."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - any error of the meter
        log.warning("a metric was not recorded", error=f"{type(exc).__name__}: {exc}")


def train_step(summary: StepSummary) -> None:
    """After a train step that ran (its metrics set)."""
    with _never_fails():
        m = activity.metric_meter()
        m.create_counter("openclaw_train_steps", "Train steps run").add(1)
        m.create_counter("openclaw_samples_trained", "Samples trained").add(summary.trained)
        m.create_counter("openclaw_samples_dropped_stale", "Samples dropped as too stale").add(summary.dropped_stale)
        m.create_gauge("openclaw_policy_version", "The policy version the trainer holds").set(summary.version)
        if summary.metrics is not None:
            x = summary.metrics  # (the SDK's gauges take no negative values: the loss stays in TensorBoard)
            m.create_gauge_float("openclaw_train_entropy", "The last step's mean token entropy").set(
                max(0.0, x.entropy)
            )
            m.create_gauge_float("openclaw_train_kl", "The last step's KL to the reference policy").set(max(0.0, x.kl))
            m.create_gauge_float("openclaw_train_grad_norm", "The last step's gradient norm").set(max(0.0, x.grad_norm))
            _mismatch(m, x)
            if x.step_s is not None:
                m.create_histogram_float("openclaw_train_step_seconds", "Wall time of one optimizer step", "s").record(
                    x.step_s
                )


_MISMATCH_GAUGES = (
    ("mismatch_mean", "The last step's on-policy train-inference mismatch: mean |trainer - engine| log-prob"),
    ("mismatch_p99", "Its 99th percentile over the step's same-version tokens"),
    ("mismatch_max", "Its largest token"),
    ("mismatch_stale_mean", "The same over older samples' tokens (numerics plus policy drift)"),
)


def _mismatch(m: MetricMeter, x: StepMetrics) -> None:
    """The step's mismatch figures (a figure the step had no sample for is left as it was)."""
    for field, text in _MISMATCH_GAUGES:
        v = getattr(x, field)
        if v is not None:
            m.create_gauge_float(f"openclaw_train_{field}", text).set(max(0.0, v))
    m.create_counter(
        "openclaw_train_mismatch_masked_tokens", "Tokens masked out of the loss for their train-inference mismatch"
    ).add(x.mismatch_masked_tokens)


def episode_step(driver: str) -> None:
    """A policy step of an episode: `agent` (the policy pool's own loop) or `client` (an outside agent's call)."""
    with _never_fails():
        m = activity.metric_meter().with_additional_attributes({"driver": driver})
        m.create_counter("openclaw_episode_steps", "Policy steps of episodes").add(1)


def envs_held(count: int) -> None:
    with _never_fails():
        activity.metric_meter().create_gauge("openclaw_envs_held", "Environments this env worker holds").set(count)


def declare(meter: MetricMeter, pool: str) -> None:
    """At a pool's start: its metrics at zero, so a dashboard shows 0 rather than no data before the first event."""
    if pool == "trainer":
        for name in (
            "openclaw_train_steps",
            "openclaw_samples_trained",
            "openclaw_samples_dropped_stale",
            "openclaw_train_mismatch_masked_tokens",
        ):
            meter.create_counter(name).add(0)
    elif pool == "policy":
        for driver in ("agent", "client"):
            meter.with_additional_attributes({"driver": driver}).create_counter("openclaw_episode_steps").add(0)
    elif pool == "env":
        meter.create_gauge("openclaw_envs_held").set(0)
