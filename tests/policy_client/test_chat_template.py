"""Our chat rendering (jinja2 and `tokenizers`, no transformers) gives transformers' prompt text, ids and decoded text.

Compared with `AutoTokenizer.apply_chat_template` / `decode` on the checkpoints the project builds (the tiny Qwen3,
a bench.pretraining tokenizer) and on folders laid out the other ways a checkpoint can hold its template: only in
tokenizer_config.json, in both places with different texts, as named templates, in additional_chat_templates/.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import jinja2
import pytest
from transformers import AutoTokenizer

from bench import pretraining
from bench.personalization import basemodel
from policy_client.chat import ChatRenderer
from policy_client.chat_template import load_chat_template

ENGINE_TEMPLATE = pretraining.TEMPLATE.read_text()

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file <as text> & say what's in it — ünïcödé, 日本語 🙂",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "lines": {"type": "integer", "minimum": 1}},
                "required": ["path"],
            },
        },
    },
    {"type": "function", "function": {"name": "noop", "parameters": {"type": "object", "properties": {}}}},
]

CALL_DICT = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": {"path": "a<b>&c.txt"}}}
CALL_STR = {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "é.txt"}'}}

CONVERSATIONS: dict[str, list[dict]] = {
    "user only": [{"role": "user", "content": "Hello there"}],
    "system and user": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+3?"}],
    "multi-turn": [
        {"role": "system", "content": "You are OpenClaw."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke.\n\nA short one."},
        {"role": "assistant", "content": "Why did the chicken cross the road?"},
        {"role": "user", "content": "why"},
    ],
    "second system message": [
        {"role": "system", "content": "first"},
        {"role": "user", "content": "u"},
        {"role": "system", "content": "a later system message"},
        {"role": "user", "content": "v"},
    ],
    "tool call, dict arguments": [
        {"role": "user", "content": "read a<b>&c.txt"},
        {"role": "assistant", "content": None, "tool_calls": [CALL_DICT]},
        {"role": "tool", "tool_call_id": "c1", "content": "the file's text\nline 2"},
    ],
    "tool calls, string arguments, content and two results": [
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "read two files"},
        {"role": "assistant", "content": "Reading both.", "tool_calls": [CALL_STR, CALL_DICT]},
        {"role": "tool", "tool_call_id": "c2", "content": "one"},
        {"role": "tool", "tool_call_id": "c1", "content": ""},
        {"role": "assistant", "content": "Done: one and (empty)."},
        {"role": "user", "content": "thanks"},
    ],
    "bare tool call shape": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": "", "tool_calls": [{"name": "noop", "arguments": {}}]},
        {"role": "tool", "content": "ok"},
    ],
    "reasoning": [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "<think>\nearlier thought\n</think>\n\nearlier answer"},
        {"role": "user", "content": "second"},
        {"role": "assistant", "content": "answer", "reasoning_content": "I should answer."},
    ],
    "reasoning under other names": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "reasoning": "by the 'reasoning' key"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "b", "thinking": "by the 'thinking' key"},
    ],
    "unicode and special text": [
        {"role": "system", "content": "Ünïcödé — 日本語, עברית, emoji 🎉🙂, combining e\u0301, nbsp\u00a0, \u2028."},
        {"role": "user", "content": "a literal <|im_end|> and <|im_start|>user\n and <tool_call> in text\r\n\ttab"},
    ],
    "empty contents": [
        {"role": "system", "content": ""},
        {"role": "user", "content": ""},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": " "},
    ],
    "None-valued keys and extra keys": [
        {"role": "user", "content": "hi", "name": None, "tool_calls": None, "weight": 0.5},
        {"role": "assistant", "content": "yo", "tool_calls": None, "reasoning_content": None},
        {"role": "user", "content": "again"},
    ],
    "content as a list of parts": [
        {"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "text", "text": "part two"}]},
    ],
    "long repeated prompt": [
        {"role": "system", "content": "Rule: use the tools you are given.\n" * 200},
        {"role": "user", "content": "Line one.\nLine two.\n\n\nAfter blank lines."},
    ],
}

KWARGS: dict[str, dict] = {
    "none": {},
    "thinking off": {"enable_thinking": False},
    "thinking on": {"enable_thinking": True},
    "an unknown kwarg": {"unused_by_template": [1, "x"]},
}


def _pretraining_files(folder: Path, *, config_template: str | None, jinja: str | None) -> Path:
    """A bench.pretraining tokenizer (byte-level BPE, digits split, Qwen3's chat tokens) with the template where
    asked: `config_template` in tokenizer_config.json, `jinja` in chat_template.jinja."""
    folder.mkdir(parents=True, exist_ok=True)
    recipe = basemodel.QUICK
    tok_json = pretraining.build_tokenizer(recipe, basemodel.CORPUS.tokenizer_texts(recipe), ENGINE_TEMPLATE)
    (folder / "tokenizer.json").write_text(tok_json)
    config = pretraining.tokenizer_config(tok_json, ENGINE_TEMPLATE, recipe.max_positions)
    if config_template is None:
        config.pop("chat_template")
    else:
        config["chat_template"] = config_template
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    if jinja is not None:
        (folder / "chat_template.jinja").write_text(jinja)
    return folder


@pytest.fixture(scope="module")
def folders(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("chat-templates")
    out = {
        "tiny-qwen3": tiny_model,  # the template in both places, the same text (as the builder writes it)
        # as bench.pretraining.ensure_model writes it: both places
        "pretraining": _pretraining_files(root / "pre", config_template=ENGINE_TEMPLATE, jinja=ENGINE_TEMPLATE),
        "config only": _pretraining_files(root / "config-only", config_template=ENGINE_TEMPLATE, jinja=None),
        # the file wins over the config's entry
        "file wins": _pretraining_files(
            root / "file-wins", config_template="CONFIG {{ messages }}", jinja=ENGINE_TEMPLATE
        ),
    }
    named = _pretraining_files(root / "named", config_template=None, jinja=None)
    config = json.loads((named / "tokenizer_config.json").read_text())
    config["chat_template"] = [
        {"name": "default", "template": ENGINE_TEMPLATE},
        {"name": "tool_use", "template": "{{ 'TOOL-USE TEMPLATE\\n' }}" + ENGINE_TEMPLATE},
    ]
    (named / "tokenizer_config.json").write_text(json.dumps(config))
    out["named in config"] = named
    extra = _pretraining_files(root / "extra-dir", config_template="CONFIG", jinja=ENGINE_TEMPLATE)
    (extra / "additional_chat_templates").mkdir()
    (extra / "additional_chat_templates" / "tool_use.jinja").write_text("{{ 'FROM DIR\\n' }}" + ENGINE_TEMPLATE)
    out["additional dir"] = extra
    # The tiny Qwen3's tokenizer.json under a config whose flags differ (the config's win, a named token is
    # special) and with model-specific named tokens (passed to the template).
    flags = root / "config-flags"
    flags.mkdir()
    for name in ("tokenizer.json", "chat_template.jinja"):
        shutil.copy(tiny_model / name, flags / name)
    config = json.loads((tiny_model / "tokenizer_config.json").read_text())
    config["added_tokens_decoder"]["151657"]["special"] = True  # <tool_call>: skipped when decoding now
    config["added_tokens_decoder"]["151643"]["special"] = False  # <|endoftext|>, the pad token: special anyway
    config["image_token"] = "<|image_pad|>"
    config["extra_special_tokens"] = {"video_token": "<|video_pad|>"}
    config["bos_token"] = "<|endoftext|>"
    (flags / "tokenizer_config.json").write_text(json.dumps(config))
    out["config flags"] = flags
    return out


_loaded: dict[Path, tuple[ChatRenderer, object]] = {}


def _pair(folder: Path) -> tuple[ChatRenderer, object]:
    if folder not in _loaded:
        _loaded[folder] = (ChatRenderer(folder), AutoTokenizer.from_pretrained(folder))
    return _loaded[folder]


FOLDERS = ["tiny-qwen3", "pretraining", "config only", "file wins", "named in config", "additional dir", "config flags"]


@pytest.mark.parametrize("name", FOLDERS)
def test_the_tokenizer_is_set_up_as_transformers_sets_it_up(folders, name):
    ours, hf = _pair(folders[name])
    assert ours.tokenizer.chat_template == hf.chat_template
    assert ours.tokenizer.special_tokens_map == hf.special_tokens_map
    assert {i: repr(t) for i, t in ours.tokenizer.added_tokens_decoder.items()} == {
        i: repr(t) for i, t in hf.added_tokens_decoder.items()
    }
    assert ours.tokenizer.unk_token_id == hf.unk_token_id
    for token in ("<|im_end|>", "<|endoftext|>", "<think>", "<tool_call>", "not a token", "a"):
        assert ours.tokenizer.convert_tokens_to_ids(token) == hf.convert_tokens_to_ids(token), token
    assert len(ours.tokenizer) == len(hf)


@pytest.mark.parametrize("name", FOLDERS)
def test_prompts_and_ids_are_transformers_ones(folders, name):
    ours, hf = _pair(folders[name])
    for label, messages in CONVERSATIONS.items():
        for tools in (None, TOOLS):
            for add_generation_prompt in (True, False):
                for kw_label, kwargs in KWARGS.items():
                    case = (label, tools is not None, add_generation_prompt, kw_label)
                    want = hf.apply_chat_template(
                        messages, tools=tools, tokenize=False, add_generation_prompt=add_generation_prompt, **kwargs
                    )
                    assert ours.render_text(messages, tools, add_generation_prompt=add_generation_prompt, **kwargs) == (
                        want
                    ), case
                    want_ids = hf.apply_chat_template(
                        messages, tools=tools, add_generation_prompt=add_generation_prompt, return_dict=False, **kwargs
                    )
                    assert ours.render(messages, tools, add_generation_prompt=add_generation_prompt, **kwargs) == (
                        want_ids
                    ), case


def test_the_template_is_chosen_as_transformers_chooses_it(folders):
    assert load_chat_template(folders["file wins"]) == ENGINE_TEMPLATE
    assert load_chat_template(folders["config only"]) == ENGINE_TEMPLATE
    assert set(load_chat_template(folders["named in config"])) == {"default", "tool_use"}  # type: ignore[arg-type]
    assert set(load_chat_template(folders["additional dir"])) == {"default", "tool_use"}  # type: ignore[arg-type]
    msgs = CONVERSATIONS["system and user"]
    for name, marker in (("named in config", "TOOL-USE TEMPLATE\n"), ("additional dir", "FROM DIR\n")):
        ours, _ = _pair(folders[name])
        assert ours.render_text(msgs, TOOLS).startswith(marker)
        assert not ours.render_text(msgs, None).startswith(marker)
        assert ours.render_text(msgs, []) == ours.render_text(msgs, None)  # no tools: the default template


FEATURES = """\
{#- What templates use of the environment: special tokens, tojson's options, loop controls, namespace, dict,
    the generation tag, strftime_now, raise_exception, and trim_blocks / lstrip_blocks on the layout. -#}
{%- set ns = namespace(n=0, seen=[]) -%}
[{{ bos_token if bos_token is defined else 'no bos' }}|{{ eos_token }}|{{ pad_token }}|{{ unk_token is defined }}]
{% for m in messages %}
    {% if m.role == 'skip' %}{% continue %}{% endif %}
    {% if loop.index > 6 %}{% break %}{% endif %}
    {% set ns.n = ns.n + 1 %}
  {% generation %}{{ m.role }}({{ m | list | sort | join(',') }}): {{ m.content }}{% endgeneration %}
    {% if m.thinking is defined %} thinking={{ m.thinking }} reasoning_content={{ m.reasoning_content }}{% endif %}

{% endfor %}
{{ tools | tojson }}
{{ tools | tojson(indent=2, sort_keys=True) }}
{{ messages | tojson(separators=(',', ':')) }}
{{ dict(a=1, b='é<&>') | tojson(ensure_ascii=True) }} {{ dict.fromkeys(['x', 'y'], 0) | tojson }}
year {{ strftime_now('%Y') | length }} n={{ ns.n }} gen={{ add_generation_prompt }} docs={{ documents }}
{{ extra | default('no extra') }} {{ eos_token_override | default('') }}
{% if fail is defined %}{{ raise_exception('refused: ' ~ fail) }}{% endif %}
"""


@pytest.fixture(scope="module")
def features(folders, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("features")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(folders["pretraining"] / name, folder / name)
    (folder / "chat_template.jinja").write_text(FEATURES)
    return folder


def test_the_environment_is_transformers_one(features):
    ours, hf = _pair(features)
    messages = [
        {"role": "system", "content": "s <b>&</b> é"},
        {"role": "skip", "content": "skipped"},
        {"role": "assistant", "content": "a", "reasoning": "r", "name": None},
        *({"role": "user", "content": f"u{i}", "n": i, "f": 1.5, "ok": True, "t": (1, 2)} for i in range(8)),
    ]
    for kwargs in ({}, {"extra": {"k": ["v", 1]}}, {"eos_token": "<<overridden>>"}, {"bos_token": "<s>"}):
        for tools in (None, TOOLS):
            want = hf.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True, **kwargs)
            assert ours.render_text(messages, tools, **kwargs) == want, kwargs
    with pytest.raises(jinja2.exceptions.TemplateError, match="refused: yes"):
        hf.apply_chat_template(messages, tokenize=False, fail="yes")
    with pytest.raises(jinja2.exceptions.TemplateError, match="refused: yes"):
        ours.render_text(messages, fail="yes")


def test_what_transformers_refuses_we_refuse(features, folders, tmp_path):
    ours, hf = _pair(folders["pretraining"])
    with pytest.raises(ValueError):
        hf.apply_chat_template([], tokenize=False)
    with pytest.raises(ValueError):
        ours.render_text([])
    with pytest.raises(TypeError):  # asking for a transformers option: an error, not a different prompt
        ours.render_text(CONVERSATIONS["user only"], continue_final_message=True)
    _without_template(folders["pretraining"], tmp_path)
    for source in ("{% set ns = namespace(_x=1) %}", "{% set ns = namespace() %}{% set ns._y = 2 %}",
                   "{{ messages.append(1) }}", "{{ ''.__class__.__mro__[1].__subclasses__() }}"):  # fmt: skip
        (tmp_path / "chat_template.jinja").write_text(source)
        ours, hf = ChatRenderer(tmp_path), AutoTokenizer.from_pretrained(tmp_path)
        with pytest.raises(jinja2.exceptions.SecurityError):
            hf.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False)
        with pytest.raises(jinja2.exceptions.SecurityError):
            ours.render_text([{"role": "user", "content": "x"}])


def _without_template(source: Path, folder: Path) -> None:
    shutil.copy(source / "tokenizer.json", folder / "tokenizer.json")
    config = json.loads((source / "tokenizer_config.json").read_text())
    config.pop("chat_template")
    (folder / "tokenizer_config.json").write_text(json.dumps(config))


def test_a_checkpoint_without_a_template_is_refused(folders, tmp_path):
    _without_template(folders["pretraining"], tmp_path)
    with pytest.raises(ValueError, match="no chat template"):
        ChatRenderer(tmp_path)


@pytest.mark.parametrize("name", ["tiny-qwen3", "pretraining", "config flags"])
def test_decoding_gives_transformers_text(folders, name):
    ours, hf = _pair(folders[name])
    rng = random.Random(0)
    added = sorted(hf.added_tokens_decoder)
    sequences = [ours.render(m, TOOLS) for m in CONVERSATIONS.values()]
    sequences += [ours.tokenizer.encode("🎉 日本語 e\u0301 — ok", add_special_tokens=False)[: k + 1] for k in range(8)]
    for _ in range(200):  # random ids, special and added ones among them, cut multi-byte characters included
        ids = [rng.choice(added) if rng.random() < 0.2 else rng.randrange(len(hf)) for _ in range(rng.randint(0, 30))]
        sequences.append(ids)
    for ids in sequences:
        for skip in (True, False):
            assert ours.decode(ids, skip_special_tokens=skip) == hf.decode(ids, skip_special_tokens=skip), (ids, skip)
    assert ours.tokenizer.decode([]) == hf.decode([])
