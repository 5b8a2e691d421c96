"""Token ids of long, mostly repeated texts, encoded one cached segment at a time.

Every chat turn resends the whole conversation (OpenClaw's system prompt alone is 8-12K tokens), so most of a
prompt's text was tokenized before. The text is cut where tokenizing the pieces gives exactly the ids of tokenizing
the whole, and each piece's ids are cached (LRU, bounded by characters):

- just before each special token (`<|im_start|>`: one cut per message): the tokenizer splits on special tokens
  before anything else;
- after a run of newlines followed by a non-space character, for tokenizers whose pre-tokenizer is the GPT-4 /
  Qwen byte-level regex (checked at load): no pre-token of that regex spans such a point (its newline alternatives
  end at the last newline, `\\s+(?!\\S)` backs off before it, the other alternatives cannot hold a newline), the
  regex has no look-behind, NFC never composes across a newline, and no added token holds a newline.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Protocol

SEGMENT_CACHE_CHARS = 4_000_000
"""Characters of text whose token ids one encoder keeps (about 40 MB of ids at most)."""

_WORDS = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|"
_REST = r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_NEWLINE_SAFE_PATTERNS = frozenset(
    {
        _WORDS + r"\p{N}" + _REST,  # Qwen2 / Qwen3
        _WORDS + r"\p{N}{1,3}" + _REST,  # GPT-4 cl100k / Llama 3
    }
)
_NEWLINE_CUT = r"(?<=\n)(?=[^\s])"


class TextTokenizer(Protocol):
    """What the encoder needs of a tokenizer: a transformers one (the engine's) and policy_client.tokenizer's
    CheckpointTokenizer (the workers') both have it. Optional, read with getattr: `added_tokens_decoder` (id ->
    tokenizers.AddedToken: special tokens to cut before) and `backend_tokenizer` (the `tokenizers.Tokenizer`: its
    normalizer, pre-tokenizer and added tokens decide the newline cuts); without them, fewer cuts or none."""

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...

    def __call__(self, texts: list[str], add_special_tokens: bool = ...) -> Mapping[str, Any]:
        """`{"input_ids": [ids of each text]}`."""
        ...


class SegmentEncoder:
    """`encode(text)` == `tokenizer.encode(text, add_special_tokens=False)`, reusing the ids of segments seen before.

    Thread-safe: the policy worker renders from activity threads, the engine tokenizes off its event loop.
    """

    def __init__(self, tokenizer: TextTokenizer, cache_chars: int = SEGMENT_CACHE_CHARS):
        self.tokenizer = tokenizer
        self.cache_chars = cache_chars
        newline = _NEWLINE_CUT if newline_cuts_are_exact(tokenizer) else None
        cuts = [c for c in (_special_token_cut(tokenizer), newline) if c]
        self._cut = re.compile("|".join(cuts)) if cuts else None
        self._segments: OrderedDict[str, list[int]] = OrderedDict()
        self._cached_chars = 0
        self._lock = threading.Lock()
        self._encoding: dict[str, threading.Event] = {}  # segments another thread is encoding right now

    def encode(self, text: str) -> list[int]:
        if self._cut is None:
            return self.tokenizer.encode(text, add_special_tokens=False)
        segments = [s for s in self._cut.split(text) if s]
        found: list[list[int] | None] = []
        mine: list[str] = []
        theirs: dict[str, threading.Event] = {}
        done = threading.Event()
        with self._lock:
            for s in segments:
                ids = self._segments.get(s)
                if ids is not None:
                    self._segments.move_to_end(s)
                elif s not in self._encoding:
                    self._encoding[s] = done
                    mine.append(s)
                elif self._encoding[s] is not done:
                    theirs[s] = self._encoding[s]
                found.append(ids)
        fresh: dict[str, list[int]] = {}
        try:
            if mine:
                # One call for all new segments: the Rust tokenizer's per-call overhead dominates short lines.
                fresh = dict(zip(mine, self._encode_new(mine)))
                self._remember(fresh)
        finally:
            with self._lock:
                for s in mine:
                    self._encoding.pop(s, None)
            done.set()
        # Requests that arrive together with the same new prompt encode it once: the others wait for it.
        for event in set(theirs.values()):
            event.wait()
        late = []
        for s in theirs:
            ids = self._lookup(s)
            if ids is None:
                late.append(s)  # not kept (too long, evicted meanwhile, or its encoding failed there)
            else:
                fresh[s] = ids
        if late:
            fresh |= dict(zip(late, self._encode_new(late)))
        if fresh:
            found = [fresh[s] if ids is None else ids for s, ids in zip(segments, found)]
        out: list[int] = []
        for ids in found:
            out += ids  # type: ignore[arg-type]
        return out

    def _lookup(self, segment: str) -> list[int] | None:
        with self._lock:
            return self._segments.get(segment)

    def _encode_new(self, segments: list[str]) -> list[list[int]]:
        return self.tokenizer(segments, add_special_tokens=False)["input_ids"]

    def _remember(self, fresh: dict[str, list[int]]) -> None:
        with self._lock:
            for s, ids in fresh.items():
                if len(s) > self.cache_chars // 4 or s in self._segments:
                    continue
                self._segments[s] = ids
                self._cached_chars += len(s)
            while self._cached_chars > self.cache_chars:
                old, _ = self._segments.popitem(last=False)
                self._cached_chars -= len(old)


def _special_token_cut(tokenizer: Any) -> str | None:
    """A pattern matching the empty string before each special token that cuts text cleanly, or None.

    Only tokens that do not swallow neighbouring whitespace (lstrip/rstrip) cut cleanly.
    """
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    specials = sorted(
        (t.content for t in decoder.values() if t.special and not t.lstrip and not t.rstrip and t.content),
        key=len,
        reverse=True,
    )
    if not specials:
        return None
    return "(?=" + "|".join(re.escape(t) for t in specials) + ")"


def newline_cuts_are_exact(tokenizer: Any) -> bool:
    """Whether cutting after a newline run before a non-space character leaves the ids unchanged (see the module)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return False
    try:  # the two parts alone: serializing the whole tokenizer (150K merges) costs half a second
        normalizer = json.loads(backend.normalizer.__getstate__()) if backend.normalizer is not None else None
        pre = json.loads(backend.pre_tokenizer.__getstate__()) if backend.pre_tokenizer is not None else {}
        added = list(backend.get_added_tokens_decoder().values())
    except (ValueError, AttributeError, TypeError):
        return False
    if normalizer is not None and normalizer.get("type") != "NFC":
        return False
    steps = pre.get("pretokenizers") if pre.get("type") == "Sequence" else None
    if not steps or len(steps) != 2:
        return False
    split, byte_level = steps
    if split.get("type") != "Split" or split.get("behavior") != "Isolated" or split.get("invert"):
        return False
    if (split.get("pattern") or {}).get("Regex") not in _NEWLINE_SAFE_PATTERNS:
        return False
    if byte_level.get("type") != "ByteLevel" or byte_level.get("use_regex"):
        return False
    # An added token matched before pre-tokenizing must not hold a newline nor swallow one on its left.
    return not any("\n" in t.content or "\r" in t.content or t.lstrip for t in added)
