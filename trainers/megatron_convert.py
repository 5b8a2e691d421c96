"""Hugging Face <-> megatron-core weight layouts for Qwen3 / Qwen2 / Llama-style dense models, whole or tensor-parallel.

The differences are layout only: megatron keeps Q, K and V in one matrix grouped
by key-value head ([q heads of group g, k_g, v_g] for each g), and the gated
MLP's gate and up projections in one matrix (gate first).

Pipeline parallelism (`pp_stage` / `pp_unstage`) gives each stage its run of layers, numbered from 0 as megatron
numbers a stage's layers, the embedding to the first stage and the final norm and output layer to the last; with
tied embeddings the last stage holds a copy of the embedding as its output layer (megatron keeps the two in step).

Tensor parallelism (`tp_split` / `tp_merge`) shards the full megatron layout the
way megatron's parallel layers hold it: column-parallel weights (QKV, fc1, the
vocabulary rows of the embedding and output layer) by rows, row-parallel ones
(the attention output projection, fc2) by columns; norms are replicated. Each
rank's QKV rows are whole key-value groups, and its fc1 rows are its slice of
gate followed by its slice of up, so both splits are plain re-slicing.
"""

from __future__ import annotations

import torch
from pydantic import BaseModel

SUPPORTED = ("qwen3", "qwen2", "llama")


class DenseArch(BaseModel):
    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    tie_word_embeddings: bool
    qkv_bias: bool

    @property
    def qk_norm(self) -> bool:
        return self.model_type == "qwen3"

    @classmethod
    def from_hf_config(cls, cfg: dict) -> "DenseArch":
        kind = cfg.get("model_type")
        if kind not in SUPPORTED:
            raise ValueError(
                f"the megatron backend converts {', '.join(SUPPORTED)} checkpoints, not {kind!r}; "
                "use training.backend=torch"
            )
        heads = cfg["num_attention_heads"]
        rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}  # newer transformers nest rope_theta here
        if rope.get("rope_type", rope.get("type", "default")) != "default":
            raise ValueError(
                f"the megatron backend supports plain RoPE, not {rope.get('rope_type') or rope.get('type')!r} scaling; "
                "use training.backend=torch"
            )
        return cls(
            model_type=kind,
            vocab_size=cfg["vocab_size"],
            hidden_size=cfg["hidden_size"],
            intermediate_size=cfg["intermediate_size"],
            num_layers=cfg["num_hidden_layers"],
            num_heads=heads,
            num_kv_heads=cfg.get("num_key_value_heads") or heads,
            head_dim=cfg.get("head_dim") or cfg["hidden_size"] // heads,
            rms_norm_eps=cfg.get("rms_norm_eps", 1e-6),
            rope_theta=rope.get("rope_theta") or cfg.get("rope_theta", 10000.0),
            max_position_embeddings=cfg.get("max_position_embeddings", 32768),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            qkv_bias=bool(cfg.get("attention_bias", kind == "qwen2")),
        )


def _group_qkv(a: DenseArch, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    per = a.num_heads // a.num_kv_heads
    tail = q.shape[1:]
    q = q.reshape(a.num_kv_heads, per * a.head_dim, *tail)
    k = k.reshape(a.num_kv_heads, a.head_dim, *tail)
    v = v.reshape(a.num_kv_heads, a.head_dim, *tail)
    return torch.cat([q, k, v], dim=1).reshape(-1, *tail)


def _split_qkv(a: DenseArch, qkv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    per = a.num_heads // a.num_kv_heads
    tail = qkv.shape[1:]
    g = qkv.reshape(a.num_kv_heads, (per + 2) * a.head_dim, *tail)
    q, k, v = torch.split(g, [per * a.head_dim, a.head_dim, a.head_dim], dim=1)
    return q.reshape(-1, *tail), k.reshape(-1, *tail), v.reshape(-1, *tail)


def hf_to_mcore(a: DenseArch, hf: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {
        "embedding.word_embeddings.weight": hf["model.embed_tokens.weight"],
        "decoder.final_layernorm.weight": hf["model.norm.weight"],
    }
    if not a.tie_word_embeddings:
        out["output_layer.weight"] = hf["lm_head.weight"]
    for i in range(a.num_layers):
        h, m = f"model.layers.{i}.", f"decoder.layers.{i}."
        att = h + "self_attn."
        out[m + "input_layernorm.weight"] = hf[h + "input_layernorm.weight"]
        out[m + "self_attention.linear_qkv.weight"] = _group_qkv(
            a, hf[att + "q_proj.weight"], hf[att + "k_proj.weight"], hf[att + "v_proj.weight"]
        )
        if a.qkv_bias:
            out[m + "self_attention.linear_qkv.bias"] = _group_qkv(
                a, hf[att + "q_proj.bias"], hf[att + "k_proj.bias"], hf[att + "v_proj.bias"]
            )
        if a.qk_norm:
            out[m + "self_attention.q_layernorm.weight"] = hf[att + "q_norm.weight"]
            out[m + "self_attention.k_layernorm.weight"] = hf[att + "k_norm.weight"]
        out[m + "self_attention.linear_proj.weight"] = hf[att + "o_proj.weight"]
        out[m + "pre_mlp_layernorm.weight"] = hf[h + "post_attention_layernorm.weight"]
        out[m + "mlp.linear_fc1.weight"] = torch.cat(
            [hf[h + "mlp.gate_proj.weight"], hf[h + "mlp.up_proj.weight"]], dim=0
        )
        out[m + "mlp.linear_fc2.weight"] = hf[h + "mlp.down_proj.weight"]
    return out


def mcore_to_hf(a: DenseArch, mc: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {
        "model.embed_tokens.weight": mc["embedding.word_embeddings.weight"],
        "model.norm.weight": mc["decoder.final_layernorm.weight"],
    }
    if not a.tie_word_embeddings:
        out["lm_head.weight"] = mc["output_layer.weight"]
    for i in range(a.num_layers):
        h, m = f"model.layers.{i}.", f"decoder.layers.{i}."
        att = h + "self_attn."
        out[h + "input_layernorm.weight"] = mc[m + "input_layernorm.weight"]
        out[att + "q_proj.weight"], out[att + "k_proj.weight"], out[att + "v_proj.weight"] = _split_qkv(
            a, mc[m + "self_attention.linear_qkv.weight"]
        )
        if a.qkv_bias:
            out[att + "q_proj.bias"], out[att + "k_proj.bias"], out[att + "v_proj.bias"] = _split_qkv(
                a, mc[m + "self_attention.linear_qkv.bias"]
            )
        if a.qk_norm:
            out[att + "q_norm.weight"] = mc[m + "self_attention.q_layernorm.weight"]
            out[att + "k_norm.weight"] = mc[m + "self_attention.k_layernorm.weight"]
        out[att + "o_proj.weight"] = mc[m + "self_attention.linear_proj.weight"]
        out[h + "post_attention_layernorm.weight"] = mc[m + "pre_mlp_layernorm.weight"]
        gate, up = torch.chunk(mc[m + "mlp.linear_fc1.weight"], 2, dim=0)
        out[h + "mlp.gate_proj.weight"], out[h + "mlp.up_proj.weight"] = gate, up
        out[h + "mlp.down_proj.weight"] = mc[m + "mlp.linear_fc2.weight"]
    return {k: v.contiguous() for k, v in out.items()}


_ROW_SHARDED = (
    "embedding.word_embeddings.weight",
    "output_layer.weight",
    "self_attention.linear_qkv.weight",
    "self_attention.linear_qkv.bias",
)
_COLUMN_SHARDED = ("self_attention.linear_proj.weight", "mlp.linear_fc2.weight")
_GATED = "mlp.linear_fc1.weight"


def check_tensor_parallel(a: DenseArch, tp: int) -> None:
    """A clear error when `tp` cannot shard this architecture evenly (megatron's layers would fail deep inside)."""
    sizes = {
        "num_attention_heads": a.num_heads,
        "num_key_value_heads": a.num_kv_heads,
        "intermediate_size": a.intermediate_size,
        "vocab_size": a.vocab_size,
    }
    uneven = [f"{name}={n}" for name, n in sizes.items() if n % tp]
    if uneven:
        raise ValueError(f"tensor_parallel={tp} does not divide this model's {', '.join(uneven)}; pick a divisor")


def tp_split(a: DenseArch, mc: dict[str, torch.Tensor], tp: int) -> list[dict[str, torch.Tensor]]:
    """The full megatron state dict as `tp` shards, one per tensor-parallel rank."""
    check_tensor_parallel(a, tp)
    shards: list[dict[str, torch.Tensor]] = [{} for _ in range(tp)]
    for key, value in mc.items():
        if key.endswith(_GATED):
            gate, up = torch.chunk(value, 2, dim=0)
            parts = [torch.cat([g, u], dim=0) for g, u in zip(torch.chunk(gate, tp), torch.chunk(up, tp), strict=True)]
        elif key.endswith(_ROW_SHARDED):
            parts = list(torch.chunk(value, tp, dim=0))
        elif key.endswith(_COLUMN_SHARDED):
            parts = list(torch.chunk(value, tp, dim=1))
        else:
            parts = [value] * tp
        for shard, part in zip(shards, parts, strict=True):
            shard[key] = part.contiguous()
    return shards


def tp_merge(a: DenseArch, shards: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The inverse of `tp_split`: one full megatron state dict from every rank's shard (replicated ones from rank 0)."""
    out: dict[str, torch.Tensor] = {}
    for key in shards[0]:
        parts = [s[key] for s in shards]
        if key.endswith(_GATED):
            halves = [torch.chunk(p, 2, dim=0) for p in parts]
            out[key] = torch.cat([h[0] for h in halves] + [h[1] for h in halves], dim=0)
        elif key.endswith(_ROW_SHARDED):
            out[key] = torch.cat(parts, dim=0)
        elif key.endswith(_COLUMN_SHARDED):
            out[key] = torch.cat(parts, dim=1)
        else:
            out[key] = parts[0]
    return out


_LAYERS = "decoder.layers."


def pp_layers(a: DenseArch, pp: int, stage: int) -> range:
    """The global indices of the layers pipeline stage `stage` of `pp` holds (an even split, as megatron's)."""
    if a.num_layers % pp:
        raise ValueError(f"pipeline_parallel={pp} does not divide this model's {a.num_layers} layers; pick a divisor")
    per = a.num_layers // pp
    return range(stage * per, (stage + 1) * per)


def _renumbered(key: str, shift: int) -> str:
    index, rest = key[len(_LAYERS) :].split(".", 1)
    return f"{_LAYERS}{int(index) + shift}.{rest}"


def pp_stage(a: DenseArch, mc: dict[str, torch.Tensor], pp: int, stage: int) -> dict[str, torch.Tensor]:
    """Pipeline stage `stage`'s part of a megatron state dict (whole or one tensor-parallel shard)."""
    layers = pp_layers(a, pp, stage)
    first, last = stage == 0, stage == pp - 1
    out: dict[str, torch.Tensor] = {}
    for key, value in mc.items():
        if key.startswith(_LAYERS):
            if int(key[len(_LAYERS) :].split(".", 1)[0]) in layers:
                out[_renumbered(key, -layers.start)] = value
        elif key.startswith("embedding."):
            if first:
                out[key] = value
        elif last:  # the final norm, and the output layer when not tied
            out[key] = value
    if last and not first and a.tie_word_embeddings:
        out["output_layer.weight"] = mc["embedding.word_embeddings.weight"]
    return out


def pp_unstage(a: DenseArch, stages: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The inverse of `pp_stage`: one state dict from every stage's part (a tied copy of the embedding dropped)."""
    pp = len(stages)
    out: dict[str, torch.Tensor] = {}
    for stage, part in enumerate(stages):
        start = pp_layers(a, pp, stage).start
        for key, value in part.items():
            if key.startswith(_LAYERS):
                out[_renumbered(key, start)] = value
            elif key == "output_layer.weight" and a.tie_word_embeddings:
                continue  # the last stage's copy of the embedding
            else:
                out[key] = value
    return out
