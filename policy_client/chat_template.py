"""A checkpoint's chat template, found and rendered the way transformers' `apply_chat_template` does, without it.

Why our own: every policy, judge and env worker (and the API through them) renders chat turns, and importing
transformers to do it pulls in torch too, about 2.7 CPU-seconds per process on its first turn for what is a Jinja
render. This module needs only jinja2. It follows transformers 5.x (`tokenization_utils_base.apply_chat_template`,
`utils/chat_template_utils.py`), so the prompt text, and so the ids, are the same as the trainer's
(`tests/policy_client/test_chat_template.py` compares the two):

- which template: `chat_template.jinja` (and `additional_chat_templates/*.jinja`, named by file) when the folder
  has one, else the `chat_template` entry of `tokenizer_config.json` (a string, or a list of named templates);
  of several named templates, `tool_use` when tools are given and the template set has one, else `default`;
- the Jinja environment: sandboxed and immutable, `trim_blocks` and `lstrip_blocks`, the loop-controls extension
  (`break`/`continue`) and a `{% generation %}` block tag (rendered as its body: we never ask for assistant masks),
  a `tojson` filter that is plain `json.dumps` (non-ASCII kept, nothing HTML-escaped; `indent`, `separators`,
  `sort_keys` accepted), and the globals `raise_exception`, `strftime_now`, `dict` and a `namespace` that refuses
  underscore-prefixed names;
- what the template sees: messages as plain dicts with their None-valued keys dropped, a message's reasoning under
  `reasoning_content` and `thinking` whichever of `reasoning_content`/`thinking`/`reasoning` carried it, `tools`
  (None when not given), `documents` (None), `add_generation_prompt`, the tokenizer's named special tokens
  (`bos_token`, `eos_token`, ... as strings), then the caller's keyword arguments (`enable_thinking`, ...), which
  win over a special token of the same name. Everything passes through plain JSON types first (`_plain`).

What we leave out: tools given as Python functions (transformers turns their signatures into JSON schemas; ours are
schemas already), batches of conversations, `continue_final_message`, assistant-token masks and control-token
sanitising (`sanitize_control_tokens`): none of our callers use them, and asking for them is an error, not a
silently different prompt.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

TEMPLATE_FILE = "chat_template.jinja"
TEMPLATES_DIR = "additional_chat_templates"
CONFIG_FILE = "tokenizer_config.json"

ChatTemplate = str | dict[str, str]
"""One template, or named templates (`default`, `tool_use`, ...)."""

_REASONING_KEYS = ("reasoning_content", "thinking", "reasoning")
_NOT_TEMPLATE_ARGUMENTS = frozenset(
    {
        "chat_template",
        "continue_final_message",
        "tokenize",
        "sanitize_control_tokens",
        "padding",
        "truncation",
        "max_length",
        "return_tensors",
        "return_dict",
        "return_assistant_tokens_mask",
        "tokenizer_kwargs",
    }
)
"""Options of transformers' `apply_chat_template` itself: passing them here would reach the template instead."""


def load_chat_template(folder: Path, config: Mapping[str, Any] | None = None) -> ChatTemplate | None:
    """The checkpoint's chat template(s), None if it has none. `config`: its tokenizer_config.json, if read already.

    Template files win over the config's entry, all of it: a folder with `chat_template.jinja` and a config holding
    another template renders with the file's (as transformers loads them)."""
    folder = Path(folder)
    files: dict[str, str] = {}
    if (folder / TEMPLATE_FILE).is_file():
        files["default"] = (folder / TEMPLATE_FILE).read_text(encoding="utf-8")
    if (folder / TEMPLATES_DIR).is_dir():
        for path in sorted((folder / TEMPLATES_DIR).glob("*.jinja")):
            files[path.name.removesuffix(".jinja")] = path.read_text(encoding="utf-8")
    if files:
        return files["default"] if list(files) == ["default"] else files
    if config is None:
        path = folder / CONFIG_FILE
        config = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    entry = config.get("chat_template")
    if isinstance(entry, (list, tuple)):
        return {t["name"]: t["template"] for t in entry}
    return entry or None


def select_template(template: ChatTemplate, tools: list | None) -> str:
    """The template to render: one of named templates is picked as transformers picks it."""
    if not isinstance(template, dict):
        return template
    if tools is not None and "tool_use" in template:
        return template["tool_use"]
    if "default" in template:
        return template["default"]
    raise ValueError(f"the checkpoint has several chat templates and none named 'default': {sorted(template)}")


def render_chat(
    template: ChatTemplate,
    messages: list[Any],
    tools: list[dict[str, Any]] | None = None,
    *,
    add_generation_prompt: bool = False,
    special_tokens: Mapping[str, str] | None = None,
    **template_kwargs: Any,
) -> str:
    """The prompt text of one conversation, as `tokenizer.apply_chat_template(..., tokenize=False)` gives it."""
    refused = _NOT_TEMPLATE_ARGUMENTS.intersection(template_kwargs)
    if refused:
        raise TypeError(f"not supported by our chat renderer: {', '.join(sorted(refused))}")
    if not messages:
        raise ValueError("cannot render an empty conversation: give at least one message")
    if isinstance(messages[0], (list, tuple)) or hasattr(messages[0], "messages"):
        raise TypeError("render one conversation at a time")
    if tools is not None:
        for tool in tools:
            if not isinstance(tool, dict):
                raise TypeError(f"tools must be given as JSON schemas (dicts), not {type(tool).__name__}")
    source = select_template(template, tools)
    chat = []
    for message in _plain(_as_dicts(messages)):
        if not isinstance(message, dict):
            raise TypeError(f"a chat message must be a dict, got {message!r}")
        message = {k: v for k, v in message.items() if v is not None}
        reasoning = next((message[k] for k in _REASONING_KEYS if message.get(k) is not None), None)
        if reasoning is not None:
            message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        chat.append(message)
    context = _plain({**(special_tokens or {}), **template_kwargs})
    return compile_template(source).render(
        messages=chat, tools=_plain(tools), documents=None, add_generation_prompt=add_generation_prompt, **context
    )


def _as_dicts(value: Any) -> Any:
    """Pydantic models and dataclasses (a message, or a tool call inside one) as dicts, recursively."""
    if isinstance(value, Mapping):
        return {k: _as_dicts(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_dicts(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_as_dicts(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _as_dicts(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if callable(getattr(value, "model_dump", None)):
        return _as_dicts(value.model_dump())
    return value


def _plain(value: Any) -> Any:
    """`value` rebuilt from plain JSON-like types, so the sandboxed template reaches no object's methods; anything
    else becomes a placeholder naming its type (`<ndarray>`), as transformers does."""
    kind = type(value)
    if value is None or kind in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if any(c.__module__ == "numpy" and c.__name__ == "generic" for c in kind.__mro__):
        return _plain(value.item())  # a numpy scalar (not imported here): np.bool_(False) must stay falsy
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if callable(getattr(value, "model_dump", None)):
        return _plain(value.model_dump())
    return f"<{kind.__name__}>"


# ---- the Jinja environment -------------------------------------------------------------------------------------


def _tojson(value, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys: bool = False):
    # Jinja's own tojson escapes <, >, & and ' for HTML and sorts keys: chat templates want plain JSON.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


@lru_cache(maxsize=16)
def compile_template(source: str):
    """The compiled template (cached: a process renders with one or two templates)."""
    import jinja2
    import jinja2.ext
    import jinja2.nodes
    import jinja2.utils
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class GenerationBlock(jinja2.ext.Extension):
        """`{% generation %}...{% endgeneration %}` marks the assistant's tokens for masks; rendered, it is its body."""

        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller):
            return caller()

    def raise_exception(message: str):
        raise jinja2.exceptions.TemplateError(message)

    class SafeDict:
        """`dict(...)` and `dict.fromkeys(...)` in templates, without handing them the dict type itself."""

        def __call__(self, *args, **kwargs):
            return dict(*args, **kwargs)

        def fromkeys(self, *args, **kwargs):
            return dict.fromkeys(*args, **kwargs)

    class SafeNamespace(jinja2.utils.Namespace):
        """A namespace that holds no underscore-prefixed attribute (a way towards Python internals)."""

        def __init__(*args, **kwargs):  # the signature of Jinja's Namespace: `namespace(self=...)` stays allowed
            self, values = args[0], dict(*args[1:], **kwargs)
            for name in values:
                SafeNamespace._check(name)
            jinja2.utils.Namespace.__init__(self, values)

        def __setitem__(self, name, value):
            SafeNamespace._check(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

        @staticmethod
        def _check(name):
            if isinstance(name, str) and name.startswith("_"):
                raise jinja2.exceptions.SecurityError(f"a chat template may not set {name!r} on a namespace")

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationBlock, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals.update(raise_exception=raise_exception, strftime_now=_strftime_now, dict=SafeDict())
    env.globals["namespace"] = SafeNamespace
    return env.from_string(source)
