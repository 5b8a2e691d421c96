from policy_client.chat_output import StreamingSplitter, parse_completion


def test_tool_calls_and_reasoning_are_separated():
    text = (
        "<think>\nneed the file\n</think>\n\nLet me look.\n"
        '<tool_call>\n{"name": "read", "arguments": {"path": "a.txt"}}\n</tool_call>'
    )
    p = parse_completion(text, "t1")
    assert p.reasoning == "need the file"
    assert p.content == "Let me look."
    assert [(c.id, c.name, c.arguments) for c in p.tool_calls] == [("call_t1_0", "read", '{"path": "a.txt"}')]


def test_malformed_tool_call_stays_in_content():
    text = "ok <tool_call>{not json}</tool_call>"
    p = parse_completion(text, "t")
    assert p.tool_calls == [] and p.content == text


def test_plain_text_is_untouched():
    assert parse_completion("  hello\n", "t").content == "  hello\n"


def _stream(text: str, step: int) -> tuple[str, str, StreamingSplitter]:
    s, reasoning, content = StreamingSplitter(), "", ""
    for begin in range(0, len(text), step):
        r, c = s.push(text[begin : begin + step])
        reasoning, content = reasoning + r, content + c
    r, c = s.finish(parse_completion(text, "t"))
    return reasoning + r, content + c, s


def test_streamed_deltas_add_up_to_the_final_parse_at_any_chunking():
    text = (
        "<think>\nplan it\n</think>\n\nAnswer <b>bold</b> then\n"
        '<tool_call>\n{"name": "exec", "arguments": {"cmd": "ls"}}\n</tool_call>'
    )
    final = parse_completion(text, "t")
    for step in (1, 2, 3, 7, 50):
        reasoning, content, _ = _stream(text, step)
        assert reasoning == final.reasoning
        assert content == final.content


def test_partial_tags_are_held_back_until_decided():
    s = StreamingSplitter()
    assert s.push("  <thi") == ("", "")
    assert s.push("nk>\n\nidea </th") == ("idea", "")
    assert s.push("ink>\n\nhello <tool_ca") == ("", "hello")
    assert s.push("ke>") == ("", " <tool_cake>")


def test_content_after_a_tool_call_is_withheld_until_the_end():
    s = StreamingSplitter()
    assert s.push("Sure.  ") == ("", "Sure.")
    assert s.push('<tool_call>{"name": "x"') == ("", "")
    assert s.push("}</tool_call> trailing") == ("", "")
    text = 'Sure.  <tool_call>{"name": "x"}</tool_call> trailing'
    assert s.finish(parse_completion(text, "t")) == ("", "   trailing")  # the parse joins the text around the call


def test_long_output_streams_without_rescanning_what_was_sent():
    """Every push inspects only the new text (and a tag's length before it): 20,000 tokens take linear work."""
    s, sent = StreamingSplitter(), []
    for i in range(20_000):
        sent.append(s.push(f"w{i} ")[1])
    assert "".join(sent) == " ".join(f"w{i}" for i in range(20_000))
    assert s._call_scan >= len(s._text) - len("<tool_call>")
