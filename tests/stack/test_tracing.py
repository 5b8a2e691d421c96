"""OpenTelemetry: one chat turn is one trace with spans from the API, the workflow worker, the pools and the
engine, exported over OTLP/HTTP by the standard OTEL_* variables to a receiver in this test."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.api.conftest import chat_stack_env, create_key
from tests.helpers import RunningStack

pytestmark = pytest.mark.timeout(300)

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


class Receiver:
    """An OTLP/HTTP trace receiver: POST /v1/traces with protobuf bodies; spans kept by trace id."""

    def __init__(self):
        self.spans: dict[str, list[tuple[str, str]]] = defaultdict(list)  # trace id -> [(service, span name)]
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.path == "/v1/traces":
                    req = ExportTraceServiceRequest.FromString(body)
                    for rs in req.resource_spans:
                        service = next(
                            (a.value.string_value for a in rs.resource.attributes if a.key == "service.name"), "?"
                        )
                        for ss in rs.scope_spans:
                            for span in ss.spans:
                                receiver.spans[span.trace_id.hex()].append((service, span.name))
                out = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def services(self, trace_id: str) -> set[str]:
        return {service for service, _ in self.spans.get(trace_id, [])}


@pytest.fixture(scope="module")
def receiver():
    r = Receiver()
    yield r
    r.server.shutdown()


@pytest.fixture(scope="module")
def traced_stack(tiny_model, tmp_path_factory, receiver):
    env = chat_stack_env(
        tmp_path_factory.mktemp("traced") / "data",
        tiny_model,
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
        OTEL_BSP_SCHEDULE_DELAY="200",  # ms: spans leave each process within a fraction of a second
    )
    stack = RunningStack(env).start()
    yield stack
    stack.stop()


def test_one_chat_turn_is_one_trace_across_processes(traced_stack, receiver):
    key = create_key(traced_stack, "traced-user")
    r = httpx.post(
        f"{traced_stack.api}/v1/chat/completions",
        json={"model": "policy", "messages": [{"role": "user", "content": "Trace this turn"}], "max_tokens": 8},
        headers={"Authorization": f"Bearer {key}", "traceparent": f"00-{TRACE_ID}-00f067aa0ba902b7-01"},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(receiver.services(TRACE_ID)) < 4:
        time.sleep(0.5)
    services = receiver.services(TRACE_ID)
    print("services in the turn's trace:", sorted(services), "spans:", len(receiver.spans[TRACE_ID]))
    assert len(services) >= 4, (services, receiver.spans.get(TRACE_ID))
    assert "openclaw-rl-api" in services and "openclaw-rl-engine" in services
    assert any(s.startswith("openclaw-rl-worker-") for s in services)
    names = [name for _, name in receiver.spans[TRACE_ID]]
    assert any("chat/completions" in n for n in names)
    # Other requests are other traces: the turn's trace holds only what served it.
    assert all(TRACE_ID != t or len(spans) < 500 for t, spans in receiver.spans.items())
