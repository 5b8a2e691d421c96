"""OpenTelemetry: one chat turn is one trace with spans from the API, the workflow worker, the pools and the
engine, and each episode step one trace (policy worker, engine, env worker) linked to the episode's, exported over
OTLP/HTTP by the standard OTEL_* variables to a receiver in this test."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from temporalio.client import Client
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.contrib.pydantic import pydantic_data_converter

from contracts.episodes import EpisodeConfig, EpisodeInput, EpisodeResult
from tests.api.conftest import chat_stack_env, create_key
from tests.helpers import RunningStack

pytestmark = pytest.mark.timeout(300)

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


class Receiver:
    """An OTLP/HTTP trace receiver: POST /v1/traces with protobuf bodies; spans kept by trace id."""

    def __init__(self):
        self.spans: dict[str, list[tuple[str, str]]] = defaultdict(list)  # trace id -> [(service, span name)]
        self.links: dict[str, set[str]] = defaultdict(set)  # trace id -> the trace ids its spans link to
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
                                receiver.links[span.trace_id.hex()].update(link.trace_id.hex() for link in span.links)
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
        OPENCLAW_RL_ENVS__TOOLCALL__MAX_STEPS="2",
        OPENCLAW_RL_ENVS__TOOLCALL__MAX_TOKENS="24",
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

    def complete() -> bool:  # each process exports its own batches: the API's request span may come last
        names = [name for _, name in receiver.spans.get(TRACE_ID, [])]
        return len(receiver.services(TRACE_ID)) >= 4 and any("chat/completions" in n for n in names)

    while time.monotonic() < deadline and not complete():
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


async def test_each_episode_step_is_a_trace_of_its_own_linked_to_the_episodes(traced_stack, receiver):
    # The test starts the episode under a span of its own, as a traced caller (the API, a parent workflow) would.
    provider = TracerProvider(resource=Resource.create({"service.name": "test-driver"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{receiver.url}/v1/traces")))
    tracer = provider.get_tracer("test")
    client = await Client.connect(
        traced_stack.temporal,
        data_converter=pydantic_data_converter,
        interceptors=[TracingInterceptor(tracer=tracer)],
    )
    # A multi-turn BFCL task: a step without a tool call opens the next turn, so the tiny model's noise takes both.
    inp = EpisodeInput(
        setting="toolcall",
        task_id="bfcl/multi_turn_base_2",
        config=EpisodeConfig(max_steps=2, max_tokens=24, prm_votes=1),
    )
    with tracer.start_as_current_span("start the episode") as span:
        episode_trace = f"{span.get_span_context().trace_id:032x}"
        handle = await client.start_workflow(
            "EpisodeWorkflow",
            inp,
            id=f"episode/traced-{uuid.uuid4().hex[:8]}",
            task_queue="openclaw-rl-workflow",
            result_type=EpisodeResult,
        )
    result = await asyncio.wait_for(handle.result(), 240)
    provider.shutdown()
    assert len(result.steps) >= 2, result

    wanted = {"openclaw-rl-worker-policy", "openclaw-rl-engine", "openclaw-rl-worker-env"}

    def step_traces() -> list[str]:
        return [t for t, linked in receiver.links.items() if episode_trace in linked and t != episode_trace]

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (
        len(step_traces()) >= len(result.steps) and all(wanted <= receiver.services(t) for t in step_traces())
    ):
        await asyncio.sleep(0.5)
    steps = step_traces()
    for t in steps:
        print("step trace", t, sorted(receiver.services(t)), sorted({n for _, n in receiver.spans[t]}))
    print(
        "episode trace", sorted(receiver.services(episode_trace)), sorted({n for _, n in receiver.spans[episode_trace]})
    )
    assert len(steps) == len(set(steps)) == len(result.steps), (steps, result.steps)
    for t in steps:
        assert wanted <= receiver.services(t), (t, receiver.spans[t])
        assert sum(name == "EpisodeStep" for _, name in receiver.spans[t]) == 1  # the step's root
    # The episode's own trace keeps the workflow and its environment's opening and closing, not the steps' spans.
    episode = receiver.spans[episode_trace]
    assert any(name == "RunWorkflow:EpisodeWorkflow" for _, name in episode), episode
    assert not any(name.endswith(":agent_step") or name.endswith(":env_step") for _, name in episode), episode
    assert "openclaw-rl-engine" not in receiver.services(episode_trace)


def test_each_call_of_a_client_driven_episode_joins_its_api_requests_trace(traced_stack, receiver):
    key = create_key(traced_stack, "traced-agent")
    auth = {"Authorization": f"Bearer {key}"}
    open_trace, step_trace = uuid.uuid4().hex, uuid.uuid4().hex
    r = httpx.post(
        f"{traced_stack.api}/v1/episodes",
        json={"samples": 1},
        headers={**auth, "traceparent": f"00-{open_trace}-00f067aa0ba902b7-01"},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    episode = r.json()["episodes"][0]["id"]
    r = httpx.post(
        f"{traced_stack.api}/v1/episodes/{episode}/chat/completions",
        json={"messages": [{"role": "user", "content": "A free-form step"}], "max_tokens": 8},
        headers={**auth, "traceparent": f"00-{step_trace}-00f067aa0ba902b7-01"},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    wanted = {"openclaw-rl-api", "openclaw-rl-worker-workflow", "openclaw-rl-worker-policy", "openclaw-rl-engine"}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (
        wanted <= receiver.services(step_trace) and open_trace in receiver.links[step_trace]
    ):
        time.sleep(0.5)
    print("the step request's trace:", sorted({n for _, n in receiver.spans[step_trace]}))
    assert wanted <= receiver.services(step_trace), receiver.spans[step_trace]
    assert open_trace in receiver.links[step_trace]  # the step's root span links to the episode's trace
    assert "openclaw-rl-engine" not in receiver.services(open_trace)
    r = httpx.post(f"{traced_stack.api}/v1/episodes/{episode}/outcome", json={"outcome": 1.0}, headers=auth, timeout=60)
    assert r.status_code == 200, r.text
