"""Session and turn identity for the reference client's headers and the stock OpenClaw client's traffic."""

from api.session_identity import TurnType, resolve_identity, strip_routing_fields

RUNTIME = "Runtime: agent=main | session=agent:main:main | sessionId=8f2c-41aa | model=openclaw-rl/tiny"
STOCK_BODY = {
    "model": "tiny",
    "stream": True,
    "messages": [
        {"role": "system", "content": "You are OpenClaw, a personal assistant." + " x" * 100},
        {"role": "user", "content": [{"type": "text", "text": f"{RUNTIME}\nhello there"}]},
    ],
}


def test_stock_client_without_headers_is_a_main_turn_of_its_runtime_session():
    ident = resolve_identity({"User-Agent": "OpenAI/JS 7.1.0"}, STOCK_BODY)
    assert (ident.session_id, ident.source, ident.turn_type, ident.session_done) == (
        "8f2c-41aa",
        "runtime-line",
        TurnType.MAIN,
        False,
    )


def test_affinity_header_and_prompt_cache_key_drop_the_compaction_suffix():
    assert resolve_identity({"session_id": "8f2c-41aa:3"}, STOCK_BODY).session_id == "8f2c-41aa"
    assert resolve_identity({"X-Session-Affinity": "abc:12"}, {"messages": []}).source == "affinity-header"
    ident = resolve_identity({}, {"messages": [], "prompt_cache_key": "abc:0"})
    assert (ident.session_id, ident.source) == ("abc", "prompt_cache_key")


def test_reference_headers_win_and_body_fields_follow():
    headers = {"X-Session-Id": "ref-1", "X-Turn-Type": "side", "X-Session-Done": "yes", "session_id": "other:1"}
    ident = resolve_identity(headers, STOCK_BODY | {"session_id": "body-1"})
    assert (ident.session_id, ident.source, ident.turn_type, ident.side_kind, ident.session_done) == (
        "ref-1",
        "x-session-id",
        TurnType.SIDE,
        "explicit",
        True,
    )
    ident = resolve_identity({}, STOCK_BODY | {"session_id": "body-1", "turn_type": "main", "session_done": "0"})
    assert (ident.session_id, ident.source, ident.turn_type, ident.session_done) == (
        "body-1",
        "body",
        TurnType.MAIN,
        False,
    )


def test_side_calls_are_recognised_by_their_system_prompt():
    def with_system(text: str) -> dict:
        return {"messages": [{"role": "system", "content": text}, {"role": "user", "content": "..."}]}

    assert resolve_identity({}, with_system("... Pre-compaction memory flush ...")).side_kind == "memory_flush"
    assert (
        resolve_identity({}, with_system("You are a context summarization assistant.")).side_kind
        == "compaction_summary"
    )
    assert resolve_identity({}, with_system("Write an Activity recap of")).turn_type == TurnType.SIDE
    # an explicit main header overrides the markers; rules are configurable
    assert resolve_identity({"X-Turn-Type": "main"}, with_system("Write an Activity recap")).turn_type == TurnType.MAIN
    custom = {"TITLE GENERATOR": "title"}
    assert resolve_identity({}, with_system("TITLE GENERATOR v2"), custom).side_kind == "title"
    # a heartbeat poll is an ordinary main-line turn
    heartbeat = {"messages": [{"role": "user", "content": "[OpenClaw heartbeat poll]"}]}
    assert resolve_identity({}, heartbeat).turn_type == TurnType.MAIN


def test_no_hint_leaves_linking_to_the_history_prefix():
    ident = resolve_identity({}, {"messages": [{"role": "user", "content": "hi"}]})
    assert (ident.session_id, ident.source) == (None, "none")


def test_routing_fields_are_stripped_before_forwarding():
    body = {"messages": [], "session_id": "s", "turn_type": "main", "session_done": True, "temperature": 0.2}
    assert strip_routing_fields(body) == {"messages": [], "temperature": 0.2}
