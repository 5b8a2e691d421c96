from api.prefix_links import _digests

MARK = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"


def test_digest_survives_what_clients_change_when_resending():
    sent = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a_3",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path": "x", "n": 1}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_a_3", "content": "out"},
        {"role": "assistant", "content": "done "},
    ]
    resent = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "q"},
        {"role": "user", "content": f"{MARK} time"},  # internal context comes and goes
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "calla3", "type": "function", "function": {"name": "read", "arguments": '{"n": 1, "path": "x"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "calla3", "content": "out"},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "next"},
    ]
    assert _digests(sent, MARK)[-1][1] == _digests(resent, MARK)[-1][1]


def test_a_different_reply_does_not_match():
    a = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "yes"}]
    b = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "no"}]
    assert _digests(a, MARK)[-1][1] != _digests(b, MARK)[-1][1]
