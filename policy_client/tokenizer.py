"""A checkpoint's tokenizer from its `tokenizer.json`, through the `tokenizers` library alone.

Workers that render chats and decode answers need encode and decode, nothing of transformers; importing it (and
torch with it) costs seconds of a core in every process. `CheckpointTokenizer` loads the same Rust tokenizer that
transformers' fast tokenizer wraps and sets it up as transformers 5.x does when loading a folder, so ids and text
are the same:

- truncation and padding off (transformers turns them off for every call that does not ask for them);
- the added tokens of `tokenizer_config.json` (`added_tokens_decoder`) added again over `tokenizer.json`'s, so the
  config's flags (`special`, `lstrip`, ...) win, then every named special token (`eos_token`, ..., model-specific
  `*_token` entries, `extra_special_tokens`) the vocabulary lacks, as a special token;
- `split_special_tokens` from the config; decoding with `skip_special_tokens` skips the tokens marked special, and
  `clean_up_tokenization_spaces` applies as transformers applies it (never to a BPE model unless forced).

It offers the part of a transformers tokenizer that our code calls (`encode`, calling it on a batch, `decode`,
`convert_tokens_to_ids`, `unk_token_id`, `added_tokens_decoder`, `backend_tokenizer`, `special_tokens_map`,
`chat_template`), so the segment encoder and the incremental detokenizer take either. Left out: tokenizer classes
that transformers rebuilds from a vocabulary instead of reading tokenizer.json as written (it does for some
model-specific classes; for Qwen2's it rebuilds what Qwen's tokenizer.json holds), and Mistral's regex patch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from policy_client.chat_template import load_chat_template

STANDARD_SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
_ADDED_TOKEN_FIELDS = ("content", "single_word", "lstrip", "rstrip", "normalized", "special")
_CLEANUPS = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
             (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))  # fmt: skip


class CheckpointTokenizer:
    def __init__(self, folder: Path):
        from tokenizers import Tokenizer

        self.path = Path(folder)
        config_path = self.path / "tokenizer_config.json"
        self.config: dict[str, Any] = {}
        if config_path.is_file():
            self.config = json.loads(config_path.read_text(encoding="utf-8"))
        if not (self.path / "tokenizer.json").is_file():  # a slow tokenizer's files only: transformers converts them
            raise FileNotFoundError(f"{self.path} has no tokenizer.json (save its tokenizer with transformers)")
        self.backend_tokenizer = Tokenizer.from_file(str(self.path / "tokenizer.json"))
        self.backend_tokenizer.no_truncation()
        self.backend_tokenizer.no_padding()
        config = _effective_config(self.config, self.path)
        named = _named_special_tokens(config)
        self.special_tokens_map: dict[str, str] = {k: _content(v) for k, v in named.items()}  # type: ignore[misc]
        self._add_config_tokens(config, list(named.values()), _extra_special_tokens(config))
        self.backend_tokenizer.encode_special_tokens = bool(self.config.get("split_special_tokens", False))
        self.chat_template = load_chat_template(self.path, self.config)
        self._clean_up = bool(self.config.get("clean_up_tokenization_spaces", False)) and (
            type(self.backend_tokenizer.model).__name__ != "BPE"
            or bool(self.config.get("clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output"))
        )
        unk = self.special_tokens_map.get("unk_token")
        self.unk_token_id: int | None = None if unk is None else self.backend_tokenizer.token_to_id(unk)

    def _add_config_tokens(self, config: dict[str, Any], named: list[Any], extra: list[Any]) -> None:
        """The config's added tokens over tokenizer.json's (adding a token again sets its flags), then the special
        tokens the vocabulary lacks."""
        from tokenizers import AddedToken

        names = {_content(v) for v in named}
        decoder = config.get("added_tokens_decoder") or {}
        tokens = []
        for _, spec in sorted(decoder.items(), key=lambda item: int(item[0])):
            token = AddedToken(**{k: v for k, v in spec.items() if k in _ADDED_TOKEN_FIELDS})
            if not token.special and token.content in names:
                token.special = True  # a named special token is special, whatever its entry says
            tokens.append(token)
        known = {t.content for t in self.backend_tokenizer.get_added_tokens_decoder().values()}
        known |= {t.content for t in tokens}
        for value in [*named, *extra]:
            if _content(value) not in known:
                tokens.append(_as_special(value))
                known.add(_content(value))
        if tokens:
            self.backend_tokenizer.add_tokens(tokens)

    # ---- what callers use of a transformers tokenizer --------------------------------------------------------

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self.backend_tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def __call__(self, texts: str | list[str], add_special_tokens: bool = True) -> dict[str, Any]:
        """`{"input_ids": ...}` of one text or of a batch (encoded together, as a transformers tokenizer does)."""
        if isinstance(texts, str):
            return {"input_ids": self.encode(texts, add_special_tokens)}
        encodings = self.backend_tokenizer.encode_batch(list(texts), add_special_tokens=add_special_tokens)
        return {"input_ids": [e.ids for e in encodings]}

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        text = self.backend_tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)
        if self._clean_up:
            for before, after in _CLEANUPS:
                text = text.replace(before, after)
        return text

    def convert_tokens_to_ids(self, tokens: str | list[str]) -> int | None | list[int | None]:
        if isinstance(tokens, str):
            tid = self.backend_tokenizer.token_to_id(tokens)
            return self.unk_token_id if tid is None else tid
        return [self.convert_tokens_to_ids(t) for t in tokens]  # type: ignore[misc]

    @property
    def added_tokens_decoder(self) -> dict[int, Any]:
        return self.backend_tokenizer.get_added_tokens_decoder()

    @property
    def eos_token(self) -> str | None:
        return self.special_tokens_map.get("eos_token")

    def __len__(self) -> int:
        return self.backend_tokenizer.get_vocab_size(with_added_tokens=True)


def _content(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]  # an AddedToken as tokenizer_config.json stores it
    return None


def _effective_config(config: dict[str, Any], folder: Path) -> dict[str, Any]:
    """The config with `additional_special_tokens` under its new name and, for a config without added tokens, the
    legacy special_tokens_map.json's entries over it (transformers reads that file only then)."""
    config = dict(config)
    if "additional_special_tokens" in config and not config.get("extra_special_tokens"):
        config["extra_special_tokens"] = config.pop("additional_special_tokens")
    legacy = folder / "special_tokens_map.json"
    if "added_tokens_decoder" not in config and legacy.is_file():
        for key, value in json.loads(legacy.read_text(encoding="utf-8")).items():
            if key == "additional_special_tokens":
                key = "extra_special_tokens"
            if key == "extra_special_tokens" and isinstance(value, list):
                have = list(config.get("extra_special_tokens") or [])
                value = have + [t for t in value if t not in have]
            config[key] = value
    return config


def _named_special_tokens(config: dict[str, Any]) -> dict[str, Any]:
    """The named special tokens (str, or an AddedToken's dict) as transformers 5 names them: the standard names,
    then model-specific ones (other `*_token` entries, a dict of `extra_special_tokens`)."""
    named = {k: config.get(k) for k in STANDARD_SPECIAL_TOKENS}
    for key, value in config.items():
        if key.endswith("_token") and key not in named and _content(value) is not None:
            named[key] = value
    extra = config.get("extra_special_tokens")
    if isinstance(extra, dict):
        named.update(extra)
    return {k: v for k, v in named.items() if _content(v) is not None}


def _extra_special_tokens(config: dict[str, Any]) -> list[Any]:
    extra = config.get("extra_special_tokens") or []
    return [] if isinstance(extra, dict) else [t for t in extra if _content(t) is not None]


def _as_special(value: Any):
    from tokenizers import AddedToken

    if isinstance(value, str):
        return AddedToken(value, special=True)
    return AddedToken(**{**{k: v for k, v in value.items() if k in _ADDED_TOKEN_FIELDS}, "special": True})
