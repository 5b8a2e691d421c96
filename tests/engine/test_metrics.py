"""/metrics in Prometheus text format (issue 14): on the engine (behind its bearer key) and on the API (behind an
API key). The exposition is checked by a strict parser of the text format (0.0.4)."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from api import metrics as api_metrics
from api.admission import Admission
from api.errors import install_error_handlers
from openclaw_rl.prometheus import Registry
from store.api_keys import KeyRecord
from tests.conftest import start_engine

_SAMPLE = re.compile(
    r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*",?)*)\})?'
    r" (?P<value>[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|Inf|NaN))$"
)
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\.)*)"')


def parse(text: str) -> dict[str, dict]:
    """{family: {"type": ..., "samples": [(name, labels, value)]}}; raises AssertionError on malformed text."""
    families: dict[str, dict] = {}
    current = None
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split(" ", 3)[2]
            assert name not in families, f"family {name} twice"
            families[name] = current = {"type": None, "samples": []}
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            assert kind in ("counter", "gauge", "histogram", "summary", "untyped") and name in families
            families[name]["type"] = kind
        else:
            m = _SAMPLE.match(line)
            assert m, f"not a sample line: {line!r}"
            labels = dict(_LABEL.findall(m["labels"] or ""))
            assert current is not None and m["name"].startswith(list(families)[-1])
            current["samples"].append((m["name"], labels, float(m["value"].replace("Inf", "inf"))))
    for name, fam in families.items():
        if fam["type"] == "histogram":
            series: dict[tuple, list] = {}
            for sample, labels, value in fam["samples"]:
                key = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
                series.setdefault(key, []).append((sample, labels.get("le"), value))
            for points in series.values():
                buckets = [v for s, le, v in points if s == f"{name}_bucket"]
                assert buckets == sorted(buckets), "bucket counts must be cumulative"
                inf = [v for s, le, v in points if le == "+Inf"]
                count = [v for s, _, v in points if s == f"{name}_count"]
                assert inf == count and len(count) == 1
    return families


def value(families: dict, family: str, sample: str | None = None, **labels: str) -> float:
    for name, lab, v in families[family]["samples"]:
        if name == (sample or family) and all(lab.get(k) == x for k, x in labels.items()):
            return v
    raise KeyError((family, labels))


def test_the_hand_written_format_escapes_label_values():
    r = Registry()
    r.counter("x_total", "help", ["who"]).inc(2, who='a "quoted"\\ \n name')
    r.histogram("lat_seconds", "help", buckets=(0.1, 1)).observe(0.5)
    fams = parse(r.render())
    assert value(fams, "x_total", who='a \\"quoted\\"\\\\ \\n name') == 2
    assert value(fams, "lat_seconds", "lat_seconds_bucket", le="0.1") == 0
    assert value(fams, "lat_seconds", "lat_seconds_bucket", le="1") == 1


@pytest.fixture(scope="module")
def keyed_engine(tiny_model, tmp_path_factory):
    proc, url = start_engine(
        tiny_model,
        tmp_path_factory.mktemp("metrics-engine"),
        OPENCLAW_RL_ENGINE__API_KEY="metrics-key",
        OPENCLAW_RL_ENGINE__PREFIX_CACHE_MB="16",
    )
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def test_engine_metrics_need_the_key_and_count_requests_tokens_and_cache_hits(keyed_engine):
    auth = {"Authorization": "Bearer metrics-key"}
    with httpx.Client(base_url=keyed_engine, timeout=120) as http:
        assert http.get("/metrics").status_code == 401
        ids = list(range(1000, 1040))
        body = {"input_ids": ids, "sampling_params": {"max_new_tokens": 3, "ignore_eos": True}}
        for _ in range(2):
            assert http.post("/generate", json=body, headers=auth | {"X-Openclaw-Tenant": "u1"}).status_code == 200
        r = http.get("/metrics", headers=auth)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4")
    fams = parse(r.text)
    assert value(fams, "engine_requests_total", outcome="done") == 2
    assert value(fams, "engine_prompt_tokens_total") == 80
    assert value(fams, "engine_generation_tokens_total") == 6
    assert value(fams, "engine_cached_prompt_tokens_total") == 32  # the second request reused 2 blocks of 16
    assert value(fams, "engine_prefix_cache_hits") == 1 and value(fams, "engine_prefix_cache_lookups") == 2
    assert value(fams, "engine_prefill_seconds", "engine_prefill_seconds_count") == 2
    assert value(fams, "engine_decode_step_seconds", "engine_decode_step_seconds_count") >= 4
    assert value(fams, "engine_request_seconds", "engine_request_seconds_count") == 2
    assert value(fams, "engine_running_requests") == 0
    assert fams["engine_queue_depth"]["type"] == "gauge"


class _Keys:
    async def lookup(self, token: str) -> KeyRecord | None:
        if token != "good":
            return None
        return KeyRecord(key_id="k1", user_id="alice", created_at=datetime.now(timezone.utc))


def test_api_metrics_count_routes_by_template_and_status_behind_an_api_key():
    app = FastAPI()
    install_error_handlers(app)
    app.state.keys = _Keys()
    app.state.admission = Admission(4)
    api_metrics.install(app)

    @app.get("/items/{item_id}")
    async def item(item_id: int) -> dict:
        return {"id": item_id}

    with TestClient(app) as client:
        assert client.get("/metrics").status_code == 401
        for i in range(3):
            assert client.get(f"/items/{i}").status_code == 200
        assert client.get("/items/x").status_code == 422
        assert client.get("/nowhere").status_code == 404
        app.state.admission.acquire("alice", "wf-1", "turn-1")
        r = client.get("/metrics", headers={"Authorization": "Bearer good"})
    assert r.status_code == 200
    fams = parse(r.text)
    assert value(fams, "api_requests_total", route="/items/{item_id}", method="GET", status="200") == 3
    assert value(fams, "api_requests_total", route="/items/{item_id}", method="GET", status="422") == 1
    assert value(fams, "api_requests_total", route="unmatched", method="GET", status="404") == 1
    assert value(fams, "api_requests_total", route="/metrics", method="GET", status="401") == 1
    assert value(fams, "api_request_seconds", "api_request_seconds_count", route="/items/{item_id}") == 4
    assert value(fams, "api_turns_in_flight") == 1
    assert value(fams, "api_requests_in_flight") == 1  # this very request
