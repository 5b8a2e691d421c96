"""Fuzzing the whole HTTP API from its own OpenAPI spec: whatever a client sends, never a 5xx.

Schemathesis reads /openapi.json from the running stack (the chat route's body schema is the
pydantic model that validates it, see api.openapi_spec) and sends schema-conforming and
schema-violating requests to every operation with a valid key. Hypothesis strategies of our own
add what a schema cannot describe: raw JSON with NaN/Infinity literals, lone surrogates, huge
numbers and deep nesting, every field of the wrong type, bad tool-call arguments, odd headers and
odd session ids in audit URLs. Each server error found on the way is pinned by a regular test at
the end of the module.

Budgets are small (the model is a tiny CPU one, generations are a few tokens, the context is
CONTEXT_TOKENS): about two minutes of requests on a loaded 2-core machine, plus the stack's start.
"""

from __future__ import annotations

import json
import socket
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from tests.api.conftest import chat_stack_env, create_key
from tests.helpers import RunningStack

pytestmark = pytest.mark.timeout(600)

_FUZZ = settings(
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],  # a server error is reported as found, unshrunk: it names the case
    suppress_health_check=list(HealthCheck),
)


def fuzz(examples: int) -> settings:
    return settings(_FUZZ, max_examples=examples)


SMALL_TOKENS = 4
"""Generated max_tokens are clamped to this: fuzzing is about the front door, not long generations."""

OPERATIONS = [
    ("POST", "/v1/chat/completions", 12),  # each valid one is a real turn: a second or two on a loaded machine
    ("GET", "/v1/sessions/{session_id}/turns", 25),
    ("DELETE", "/v1/sessions/{session_id}", 25),
    ("GET", "/v1/sessions", 15),
    ("GET", "/v1/models", 5),
    ("POST", "/v1/episodes", 8),
    ("GET", "/v1/episodes/{episode_id}", 8),
    ("POST", "/v1/episodes/{episode_id}/chat/completions", 6),
    ("POST", "/v1/episodes/{episode_id}/tools/{name}", 6),
    ("POST", "/v1/episodes/{episode_id}/exec", 6),
    ("POST", "/v1/episodes/{episode_id}/outcome", 6),
    ("GET", "/v1/me/data", 5),
    ("POST", "/v1/me/opt-out", 5),
    ("DELETE", "/v1/me/opt-out", 5),  # not DELETE /v1/me/data: it would forget the fuzzer (its key too)
    ("GET", "/v1/me/progress", 4),
    ("POST", "/v1/me/progress", 3),
    ("GET", "/healthz", 3),
    ("GET", "/readyz", 3),
]


CONTEXT_TOKENS = 256
"""The fuzzed stack's context: a valid request with a huge max_tokens is clamped to it, so even that turn is short."""


@pytest.fixture(scope="module")
def chat_stack(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    """The whole stack, as tests/api/conftest.py starts it, with a small context."""
    env = chat_stack_env(
        tmp_path_factory.mktemp("fuzz") / "data", tiny_model, OPENCLAW_RL_POLICY__CONTEXT_LENGTH=str(CONTEXT_TOKENS)
    )
    stack = RunningStack(env).start()
    yield stack
    stack.stop()


@pytest.fixture(scope="module")
def key(chat_stack) -> str:
    return create_key(chat_stack, "fuzzer")


@pytest.fixture(scope="module")
def api_schema(chat_stack):
    return schemathesis.openapi.from_url(f"{chat_stack.api}/openapi.json", timeout=30)


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


# ---- the spec ----------------------------------------------------------------------------------------------------


def test_the_spec_is_served_and_documents_the_chat_body_and_auth(chat_stack):
    r = httpx.get(f"{chat_stack.api}/openapi.json", timeout=30)
    assert r.status_code == 200, r.text
    spec = r.json()
    chat = spec["paths"]["/v1/chat/completions"]["post"]
    body = chat["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/ChatCompletionRequest"}
    schemas = spec["components"]["schemas"]
    request = schemas["ChatCompletionRequest"]
    assert request["required"] == ["messages"]
    assert {"messages", "tools", "max_tokens", "stream", "session_id"} <= set(request["properties"])
    assert schemas["ChatMessage"]["properties"]["role"]["enum"] == ["system", "developer", "user", "assistant", "tool"]
    assert {"X-Session-Id", "Idempotency-Key"} <= {p["name"] for p in chat["parameters"] if p["in"] == "header"}
    assert spec["components"]["securitySchemes"]["ApiKey"] == {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "ocrl-<key id>-<secret>",
        "description": "An API key from `openclaw-rl keys create --user NAME`",
    }
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            if path.startswith("/v1/"):
                assert op.get("security") == [{"ApiKey": []}], (method, path)
                assert "401" in op["responses"], (method, path)
    # still served without a key, as before; the routes themselves still want one
    assert httpx.get(f"{chat_stack.api}/v1/models", timeout=30).status_code == 401


# ---- schemathesis: every operation, conforming and violating ----------------------------------------------------


def _short_and_fresh(case):
    """Keep generated turns short: a token budget over SMALL_TOKENS (546 or 546.0 alike) becomes SMALL_TOKENS.

    And make a generated Idempotency-Key unique: Hypothesis repeats its favourite values ("0"), and a key seen
    with another request is a 422 that would hide everything else the case holds (replays: test_input_robustness).
    """
    key = (case.headers or {}).get("Idempotency-Key")
    if isinstance(key, str) and key.strip() and len(key) <= 240:
        case.headers["Idempotency-Key"] = f"{key}-{uuid.uuid4().hex[:12]}"
    if isinstance(case.body, dict):
        for field in ("max_tokens", "max_completion_tokens"):
            value = case.body.get(field)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > SMALL_TOKENS:
                case.body[field] = SMALL_TOKENS
    return case


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=lambda m: m.value)
@pytest.mark.parametrize("method,path,examples", OPERATIONS, ids=[f"{m} {p}" for m, p, _ in OPERATIONS])
def test_schemathesis_finds_no_server_error(api_schema, chat_stack, key, method, path, examples, mode):
    operation = api_schema[path][method]
    takes = [operation.definition.raw.get(k) for k in ("parameters", "requestBody", "security")]
    if mode is GenerationMode.NEGATIVE and not any(takes):
        pytest.skip("nothing to violate: the operation takes no input")
    strategy = operation.as_strategy(generation_mode=mode).map(_short_and_fresh)
    seen: list[int] = []

    @fuzz(examples)
    @given(case=strategy)
    def run(case):
        response = case.call(base_url=chat_stack.api, headers=bearer(key), timeout=120)
        seen.append(response.status_code)
        case.validate_response(response, checks=[not_a_server_error])

    run()
    assert seen, "nothing was sent"
    if mode is GenerationMode.POSITIVE and path == "/v1/chat/completions":
        assert 200 in seen, seen  # conforming requests reach the model, not just the validators


# ---- our own strategies: what a schema cannot say -----------------------------------------------------------------


class Raw(str):
    """A JSON fragment to splice into a body as it is (NaN, Infinity, a lone surrogate escape, a huge number)."""


def dumps(value: Any) -> str:
    """JSON text of `value`, with Raw fragments spliced in verbatim."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(dumps(v) for v in value) + "]"
    return json.dumps(value)


NON_FINITE = st.sampled_from([Raw("NaN"), Raw("Infinity"), Raw("-Infinity"), Raw("1e999"), Raw("-1e999")])
HUGE_NUMBERS = st.one_of(
    st.integers(min_value=19, max_value=5000).map(lambda d: Raw("9" * d)),  # 5000 digits: past int_max_str_digits
    st.integers(min_value=19, max_value=400).map(lambda d: Raw("-" + "9" * d)),
    st.sampled_from([Raw("1e308"), Raw("-1e308"), Raw("5e-324"), Raw("1.7976931348623157e309"), Raw("-0")]),
)
SURROGATES = st.sampled_from(["\\ud800", "\\udfff", "\\udc00x", "x\\ud83d", "\\ud83d\\ude00\\ud800"]).map(
    lambda s: Raw(f'"{s}"')
)
TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", " ", "\x00", "\u202e", "\ufeff", "<tool_call>", "</think>", "{{ 7*7 }}", "{% raw %}"]),
)
NASTY_TEXT = st.one_of(TEXT, SURROGATES)
WRONG_TYPES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    NASTY_TEXT,
    st.just([]),
    st.just({}),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    NON_FINITE,
    HUGE_NUMBERS,
)
ROLES = st.one_of(
    st.sampled_from(["system", "developer", "user", "assistant", "tool"]),
    st.sampled_from(["function", "", "USER", "User ", "ipython", "system\x00", "root", "assistant\n"]),
    WRONG_TYPES,
)
BAD_ARGUMENTS = st.one_of(
    st.sampled_from(["{", "}", "null", "[]", '"str"', '{"a": NaN}', '{"a": 1e999}', "{'a': 1}", "\\ud800", ""]),
    st.text(max_size=30),
    st.just("{" * 200 + "}" * 200),
    st.just('{"x": "' + "y" * 20000 + '"}'),
    WRONG_TYPES,
)


@st.composite
def nested(draw) -> Raw:
    depth = draw(st.one_of(st.integers(min_value=55, max_value=75), st.sampled_from([500, 5000, 60000])))
    opener, closer = draw(st.sampled_from([("[", "]"), ('{"a": ', "}")]))
    return Raw(opener * depth + "1" + closer * depth)


ANY_VALUE = st.one_of(WRONG_TYPES, nested(), ROLES)


def _long_turn(value: Any) -> bool:
    """A token budget the API takes and that would make the turn long (a huge one is clamped to the context)."""
    try:
        number = json.loads(value) if isinstance(value, Raw) else value
    except (ValueError, RecursionError):
        return False
    if isinstance(number, bool):
        return False
    if isinstance(number, float):
        return number == number and abs(number) != float("inf") and number.is_integer() and number > SMALL_TOKENS
    return isinstance(number, int) and number > SMALL_TOKENS


TOKEN_BUDGETS = st.one_of(st.integers(1, SMALL_TOKENS), ANY_VALUE.filter(lambda v: not _long_turn(v)))
"""max_tokens values: anything but a valid long budget (test_a_huge_max_tokens_is_clamped_to_the_context has those)."""


@st.composite
def tool_call(draw) -> dict:
    call: dict[str, Any] = {"function": {"name": draw(NASTY_TEXT), "arguments": draw(BAD_ARGUMENTS)}}
    if draw(st.booleans()):
        call["id"] = draw(NASTY_TEXT)
    if draw(st.booleans()):
        call["type"] = draw(st.one_of(st.just("function"), WRONG_TYPES))
    return call


@st.composite
def message(draw) -> dict:
    msg: dict[str, Any] = {"role": draw(ROLES)}
    msg["content"] = draw(
        st.one_of(
            NASTY_TEXT,
            st.just(""),
            st.just("word " * 3000),  # long, under the body limit
            st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": NASTY_TEXT}), max_size=3),
            st.lists(st.dictionaries(st.sampled_from(["type", "text", "image_url"]), ANY_VALUE), max_size=2),
            ANY_VALUE,
        )
    )
    if draw(st.booleans()):
        msg["tool_calls"] = draw(st.one_of(st.lists(tool_call(), max_size=3), ANY_VALUE))
    for field in ("tool_call_id", "name", "reasoning_content"):
        if draw(st.integers(0, 3)) == 0:
            msg[field] = draw(st.one_of(NASTY_TEXT, ANY_VALUE))
    return msg


@st.composite
def valid_message(draw) -> dict:
    """A message of the right shape, with nasty text and tool calls whose arguments are any string at all."""
    role = draw(st.sampled_from(["system", "developer", "user", "assistant", "tool"]))
    msg: dict[str, Any] = {
        "role": role,
        "content": draw(st.one_of(TEXT, st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": TEXT})))),
    }
    if role == "assistant" and draw(st.booleans()):
        arguments = st.one_of(BAD_ARGUMENTS.filter(lambda a: isinstance(a, str)), st.dictionaries(TEXT, ANY_VALUE))
        calls = st.fixed_dictionaries(
            {"id": TEXT, "type": st.just("function"), "function": st.fixed_dictionaries(
                {"name": TEXT, "arguments": arguments}
            )}
        )  # fmt: skip
        msg["tool_calls"] = draw(st.lists(calls, min_size=1, max_size=2))
        if draw(st.booleans()):
            msg["content"] = None
    if role == "tool":
        msg["tool_call_id"] = draw(st.text(min_size=1, max_size=12))
    return msg


@st.composite
def valid_ish_body(draw) -> dict:
    """A request the API takes, or nearly: the nastiness is in the values, so it reaches the turn itself."""
    body: dict[str, Any] = {
        "messages": draw(st.lists(valid_message(), min_size=1, max_size=4)),
        "max_tokens": draw(st.integers(1, SMALL_TOKENS)),
    }
    optional = {
        "model": TEXT,
        "temperature": st.floats(0, 2),
        "top_p": st.floats(0, 1, exclude_min=True),
        "stop": st.one_of(st.lists(TEXT, max_size=4), TEXT),
        "stream": st.booleans(),
        "stream_options": st.fixed_dictionaries({"include_usage": st.booleans()}),
        "tools": st.lists(
            st.fixed_dictionaries(
                {
                    "type": st.just("function"),
                    "function": st.fixed_dictionaries(
                        {"name": TEXT.filter(bool), "parameters": st.dictionaries(TEXT, ANY_VALUE)}
                    ),
                }
            ),
            max_size=2,
        ),
        "tool_choice": st.one_of(st.sampled_from(["none", "auto", "required"]), st.dictionaries(TEXT, ANY_VALUE)),
        "session_id": TEXT,
        "turn_type": TEXT,
        "session_done": ANY_VALUE,
        "prompt_cache_key": TEXT,
        "unknown_field": ANY_VALUE,
    }
    for name in draw(st.lists(st.sampled_from(sorted(optional)), unique=True, max_size=5)):
        body[name] = draw(optional[name])
    return body


@st.composite
def chat_body(draw) -> str:
    kind = draw(st.integers(0, 9))
    if kind < 5:  # half the time a request the API takes, or nearly: it reaches the turn
        return dumps(draw(valid_ish_body()))
    if kind == 8:
        return draw(nested())
    if kind == 9:  # not an object at all
        return dumps(draw(ANY_VALUE))
    body: dict[str, Any] = {
        "messages": draw(
            st.one_of(
                st.lists(message(), min_size=1, max_size=4),
                st.just([]),
                st.just([{}]),
                ANY_VALUE,
            )
        ),
        "max_tokens": draw(TOKEN_BUDGETS),
    }
    optional = {
        "model": st.one_of(NASTY_TEXT, ANY_VALUE),
        "temperature": st.one_of(st.floats(), NON_FINITE, ANY_VALUE),
        "top_p": st.one_of(st.floats(), NON_FINITE, ANY_VALUE),
        "max_completion_tokens": TOKEN_BUDGETS,
        "stop": st.one_of(st.lists(NASTY_TEXT, max_size=6), NASTY_TEXT, ANY_VALUE),
        "n": st.one_of(st.just(1), ANY_VALUE),
        "stream": st.one_of(st.booleans(), ANY_VALUE),
        "stream_options": st.one_of(st.fixed_dictionaries({"include_usage": st.booleans()}), ANY_VALUE),
        "tools": st.one_of(
            st.lists(
                st.fixed_dictionaries(
                    {
                        "type": st.just("function"),
                        "function": st.fixed_dictionaries(
                            {"name": NASTY_TEXT, "parameters": st.dictionaries(st.text(max_size=5), ANY_VALUE)}
                        ),
                    }
                ),
                max_size=2,
            ),
            ANY_VALUE,
        ),
        "tool_choice": st.one_of(st.sampled_from(["none", "auto", "required", "any"]), ANY_VALUE),
        "session_id": st.one_of(NASTY_TEXT, st.just("s" * 300), ANY_VALUE),
        "turn_type": st.one_of(st.sampled_from(["main", "side"]), ANY_VALUE),
        "session_done": ANY_VALUE,
        "prompt_cache_key": st.one_of(NASTY_TEXT, ANY_VALUE),
        "unknown_field": ANY_VALUE,
    }
    for name in draw(st.lists(st.sampled_from(sorted(optional)), unique=True, max_size=5)):
        body[name] = draw(optional[name])
    return dumps(body)


HEADER_TEXT = st.one_of(
    # any ASCII but what HTTP/1.1 itself cannot carry in a value (NUL, CR, LF and the other whitespace)
    st.text(st.characters(max_codepoint=0x7F, exclude_characters="\x00\t\n\x0b\x0c\r "), min_size=1, max_size=40),
    st.sampled_from(["a\x01b", "\x7f", "x\x1by", "s" * 300, "会话", "é", "%00", "..", "a/b", "x:1", "\u202e"]),
)


@st.composite
def odd_headers(draw) -> dict[str, bytes]:
    names = ["X-Session-Id", "Idempotency-Key", "X-Turn-Type", "X-Session-Done", "session_id", "x-session-affinity"]
    chosen = draw(st.lists(st.sampled_from(names), unique=True, max_size=3))
    return {name: draw(HEADER_TEXT).encode() for name in chosen}


@given(raw=chat_body(), headers=odd_headers())
@fuzz(80)
def test_nasty_chat_requests_are_never_a_server_error(chat_stack, key, raw, headers):
    r = httpx.post(
        f"{chat_stack.api}/v1/chat/completions",
        content=raw.encode("utf-8", "surrogatepass"),
        headers={"Content-Type": "application/json", **bearer(key), **headers},
        timeout=120,
    )
    assert r.status_code < 500, (r.status_code, r.text[:500], raw[:500], headers)
    if r.status_code >= 400:
        assert r.json()["error"]["message"], r.text


FIELDS = [
    "model",
    "messages",
    "messages.0",
    "messages.0.role",
    "messages.0.content",
    "messages.0.content.0",
    "messages.0.content.0.text",
    "messages.0.name",
    "messages.0.tool_call_id",
    "messages.0.reasoning_content",
    "messages.1.tool_calls",
    "messages.1.tool_calls.0",
    "messages.1.tool_calls.0.function",
    "messages.1.tool_calls.0.function.name",
    "messages.1.tool_calls.0.function.arguments",
    "tools",
    "tools.0",
    "tools.0.function",
    "tools.0.function.parameters",
    "tool_choice",
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "n",
    "stream",
    "stream_options",
    "stream_options.include_usage",
    "session_id",
    "turn_type",
    "session_done",
]
"""Every field the API reads, in a request where everything else is valid."""
WRONG_VALUES = [None, True, 0, -1, 1.5, "", "x", [], {}, [1], {"a": 1}, Raw("NaN"), Raw("-Infinity"), Raw("9" * 30)]


def with_value(field: str, value: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "stream_options": {"include_usage": True},
        "max_tokens": 1,
    }
    *parents, last = field.split(".")
    node: Any = body
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return body


@given(field=st.sampled_from(FIELDS), value=st.sampled_from(WRONG_VALUES))
@fuzz(60)
def test_any_field_of_the_wrong_type_is_never_a_server_error(chat_stack, key, field, value):
    assume(not (field.startswith("max_") and _long_turn(value)))
    r = httpx.post(
        f"{chat_stack.api}/v1/chat/completions",
        content=dumps(with_value(field, value)).encode(),
        headers={"Content-Type": "application/json", **bearer(key), "X-Session-Id": f"types-{field}"},
        timeout=120,
    )
    assert r.status_code < 500, (field, value, r.status_code, r.text[:300])


def test_a_huge_max_tokens_is_clamped_to_the_context(chat_stack, key):
    """Any positive integer budget is taken and cut to what the context leaves; a prompt close to the context keeps
    that short. A float too big for an integer is a 422."""
    prompt = "hi " * (CONTEXT_TOKENS - 40)  # the tiny model's tokenizer: one token a word, plus ~9 of the template
    for budget in (Raw("9" * 30), Raw(str(2**63)), Raw(str(2**64 + 1)), Raw("1e300")):
        body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": budget}
        r = httpx.post(
            f"{chat_stack.api}/v1/chat/completions",
            content=dumps(body).encode(),
            headers={"Content-Type": "application/json", **bearer(key)},
            timeout=120,
        )
        if budget == "1e300":
            assert r.status_code == 422 and r.json()["error"]["param"] == "max_tokens", r.text
            continue
        assert r.status_code == 200, (budget, r.text)
        usage = r.json()["usage"]
        assert usage["total_tokens"] <= CONTEXT_TOKENS and usage["prompt_tokens"] > CONTEXT_TOKENS - 40, usage


SESSION_PATHS = st.one_of(
    st.text(max_size=30).map(lambda s: quote(s, safe="")),
    st.sampled_from(
        ["%00", "%ff%fe", "%ED%A0%80", "%2E%2E", "%2F", "a%2Fb", "..%2F..", "%25", "%20", "x" * 5000, "%C0%AF"]
    ),
)
QUERY_NUMBERS = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80).map(str),
    st.sampled_from(["NaN", "Infinity", "-1", "1e9", "", "0x10", "9" * 5000, "1.5", "\u0661"]),
)


@given(session=SESSION_PATHS, offset=st.none() | QUERY_NUMBERS, limit=st.none() | QUERY_NUMBERS)
@fuzz(40)
def test_odd_audit_requests_are_never_a_server_error(chat_stack, key, session, offset, limit):
    params = {k: v for k, v in {"offset": offset, "limit": limit}.items() if v is not None}
    query = "&".join(f"{k}={quote(v)}" for k, v in params.items())
    for method, path in (("GET", f"/v1/sessions/{session}/turns"), ("DELETE", f"/v1/sessions/{session}")):
        url = f"{chat_stack.api}{path}" + (f"?{query}" if query and method == "GET" else "")
        r = httpx.request(method, url, headers=bearer(key), timeout=60)
        assert r.status_code < 500, (method, url[:300], r.status_code, r.text[:300])
    r = httpx.get(f"{chat_stack.api}/v1/sessions?{query}", headers=bearer(key), timeout=60)
    assert r.status_code < 500, (query[:300], r.status_code, r.text[:300])


def raw_http(stack, request: bytes) -> int:
    """Send bytes no HTTP client would; the status line's code (0: the server closed without answering)."""
    host, port = stack.api.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as s:
        s.sendall(request)
        head = b""
        while b"\r\n" not in head:
            chunk = s.recv(4096)
            if not chunk:
                return 0
            head += chunk
    return int(head.split(b" ", 2)[1])


@pytest.mark.parametrize(
    "header",
    [
        b"X-Session-Id: a\x01b",
        b"X-Session-Id: \x7f",
        b"X-Session-Id: a\x1bb\x1f",
        b"X-Session-Id: \xff\xfe",  # not UTF-8
        b"X-Session-Id: \xed\xa0\x80",  # a UTF-8-encoded surrogate
        b"X-Session-Id: " + b"s" * 300,
        b"X-Session-Id: a\x00b",
        b"X-Session-Id: a\rb",
        b"Idempotency-Key: \x01",
        b"x-session-affinity: \xc3\xa9:1",
        b"Authorization: Bearer \xff",
    ],
)
def test_control_characters_and_raw_bytes_in_headers_are_never_a_server_error(chat_stack, key, header):
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}).encode()
    auth = b"" if header.startswith(b"Authorization") else f"Authorization: Bearer {key}\r\n".encode()
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: fuzz\r\nContent-Type: application/json\r\n"
        + auth
        + header
        + b"\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\nConnection: close\r\n\r\n"
        + body
    )
    status = raw_http(chat_stack, request)
    assert 400 <= status < 500 or status == 200, status


# ---- regressions: the server errors found on the way, as plain examples ------------------------------------------


@pytest.mark.parametrize("session_id", ["会话-é", "🙂", "ŝ" * 100])
def test_a_session_id_outside_latin1_is_echoed_not_a_500(chat_stack, key, session_id):
    """The X-Session-Id response header was written as Latin-1: any other character crashed the reply (500)."""
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "session_id": session_id}
    r = httpx.post(f"{chat_stack.api}/v1/chat/completions", json=body, headers=bearer(key), timeout=120)
    assert r.status_code == 200, r.text
    assert r.headers["X-Session-Id"] == session_id
    streamed = httpx.post(
        f"{chat_stack.api}/v1/chat/completions", json={**body, "stream": True}, headers=bearer(key), timeout=120
    )
    assert streamed.status_code == 200 and streamed.headers["X-Session-Id"] == session_id, streamed.text
    # the header names the same session as the body: its UTF-8 bytes are read as UTF-8
    again = httpx.post(
        f"{chat_stack.api}/v1/chat/completions",
        json={k: v for k, v in body.items() if k != "session_id"},
        headers={**bearer(key), "X-Session-Id": session_id.encode()},
        timeout=120,
    )
    assert again.status_code == 200 and again.headers["X-Session-Id"] == session_id, again.text
    log = httpx.get(f"{chat_stack.api}/v1/sessions/{quote(session_id, safe='')}/turns", headers=bearer(key))
    assert log.status_code == 200 and log.json()["total"] == 3, log.text


@pytest.mark.parametrize("session_id", ["a\nb", "a\rb", "tab\there", "nul\x00", "esc\x1b[31m", "mid\x85dle"])
def test_a_session_id_with_a_control_character_is_a_400_not_a_500(chat_stack, key, session_id):
    """A CR, LF or NUL reached the X-Session-Id response header: h11 refused to write it, and the client got no
    response at all (the turn had run). A session id with any control character is now refused up front."""
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "session_id": session_id}
    r = httpx.post(f"{chat_stack.api}/v1/chat/completions", json=body, headers=bearer(key), timeout=120)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "invalid_session_id" and "control character" in err["message"], err


def test_a_session_id_with_a_slash_can_be_audited_and_ended(chat_stack, key):
    """`a/b` could be chatted in but never audited or ended: the route's `{session_id}` stopped at '/' (404)."""
    sid = f"team/{uuid.uuid4().hex[:6]}"
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "session_id": sid}
    assert httpx.post(f"{chat_stack.api}/v1/chat/completions", json=body, headers=bearer(key), timeout=120).is_success
    log = httpx.get(f"{chat_stack.api}/v1/sessions/{quote(sid, safe='')}/turns", headers=bearer(key), timeout=30)
    assert log.status_code == 200 and log.json()["session_id"] == sid, log.text
    ended = httpx.delete(f"{chat_stack.api}/v1/sessions/{quote(sid, safe='')}", headers=bearer(key), timeout=30)
    assert ended.status_code == 200, ended.text
