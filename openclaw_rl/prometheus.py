"""Prometheus text exposition (format 0.0.4), written by hand: counters, gauges and histograms with labels.

Small on purpose: the engine and the API each keep a `Registry`, update it from any thread, and render it for
GET /metrics. Label values are escaped as the format asks (backslash, double quote, newline).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Sequence

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _fmt(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def _labels(names: Sequence[str], values: Sequence[str], extra: tuple[str, str] | None = None) -> str:
    pairs = [f'{n}="{_escape(v)}"' for n, v in zip(names, values)]
    if extra is not None:
        pairs.append(f'{extra[0]}="{_escape(extra[1])}"')
    return "{" + ",".join(pairs) + "}" if pairs else ""


class _Metric:
    kind = ""

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = ()):
        self.name, self.help, self.label_names = name, help_text, tuple(labels)
        self._lock = threading.Lock()

    def _key(self, labels: dict[str, str] | None) -> tuple[str, ...]:
        labels = labels or {}
        return tuple(str(labels.get(n, "")) for n in self.label_names)

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]


class Counter(_Metric):
    kind = "counter"

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = ()):
        super().__init__(name, help_text, labels)
        self._values: dict[tuple[str, ...], float] = {}

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        key = self._key(labels)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def render(self) -> list[str]:
        with self._lock:
            items = sorted(self._values.items())
        if not items and not self.label_names:
            items = [((), 0.0)]
        return self.header() + [f"{self.name}{_labels(self.label_names, k)} {_fmt(v)}" for k, v in items]


class Gauge(_Metric):
    """A value set by the owner, or read at render time from `source` (label values -> value)."""

    kind = "gauge"

    def __init__(
        self,
        name: str,
        help_text: str,
        labels: Sequence[str] = (),
        source: Callable[[], Iterable[tuple[Sequence[str], float]]] | None = None,
    ):
        super().__init__(name, help_text, labels)
        self._values: dict[tuple[str, ...], float] = {}
        self.source = source

    def set(self, value: float, **labels: str) -> None:
        with self._lock:
            self._values[self._key(labels)] = value

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        key = self._key(labels)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def dec(self, amount: float = 1.0, **labels: str) -> None:
        self.inc(-amount, **labels)

    def render(self) -> list[str]:
        if self.source is not None:
            items = sorted((tuple(str(x) for x in k), float(v)) for k, v in self.source())
        else:
            with self._lock:
                items = sorted(self._values.items())
        if not items and not self.label_names:
            items = [((), 0.0)]
        return self.header() + [f"{self.name}{_labels(self.label_names, k)} {_fmt(v)}" for k, v in items]


class Histogram(_Metric):
    kind = "histogram"

    def __init__(
        self, name: str, help_text: str, labels: Sequence[str] = (), buckets: Sequence[float] = LATENCY_BUCKETS
    ):
        super().__init__(name, help_text, labels)
        self.buckets = tuple(sorted(buckets))
        self._series: dict[tuple[str, ...], list] = {}  # key -> [bucket counts..., sum, count]

    def observe(self, value: float, **labels: str) -> None:
        key = self._key(labels)
        with self._lock:
            s = self._series.get(key)
            if s is None:
                s = self._series[key] = [0] * len(self.buckets) + [0.0, 0]
            for i, bound in enumerate(self.buckets):
                if value <= bound:
                    s[i] += 1
            s[-2] += value
            s[-1] += 1

    def render(self) -> list[str]:
        with self._lock:
            series = sorted((k, list(v)) for k, v in self._series.items())
        lines = self.header()
        for key, s in series:
            for bound, n in zip(self.buckets, s):
                lines.append(f"{self.name}_bucket{_labels(self.label_names, key, ('le', _fmt(bound)))} {n}")
            lines.append(f"{self.name}_bucket{_labels(self.label_names, key, ('le', '+Inf'))} {s[-1]}")
            lines.append(f"{self.name}_sum{_labels(self.label_names, key)} {_fmt(s[-2])}")
            lines.append(f"{self.name}_count{_labels(self.label_names, key)} {s[-1]}")
        return lines


class Registry:
    def __init__(self) -> None:
        self._metrics: list[_Metric] = []

    def counter(self, name: str, help_text: str, labels: Sequence[str] = ()) -> Counter:
        return self._add(Counter(name, help_text, labels))

    def gauge(self, name: str, help_text: str, labels: Sequence[str] = (), source=None) -> Gauge:
        return self._add(Gauge(name, help_text, labels, source))

    def histogram(
        self, name: str, help_text: str, labels: Sequence[str] = (), buckets: Sequence[float] = LATENCY_BUCKETS
    ) -> Histogram:
        return self._add(Histogram(name, help_text, labels, buckets))

    def _add(self, metric):
        self._metrics.append(metric)
        return metric

    def render(self) -> str:
        lines: list[str] = []
        for m in self._metrics:
            lines += m.render()
        return "\n".join(lines) + "\n"
