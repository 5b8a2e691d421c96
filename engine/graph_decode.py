"""A decode step that CUDA graphs can capture: on a GPU the eager Hugging Face forward is bound by kernel launches
(an H100 took ~30 ms per step for a 1.7B model whether it decoded 1 row or 64), so the decode step is replayed from
a captured graph instead.

A graph needs fixed shapes and fixed addresses, which the batch's growing, left-padded `GrowingCache` never has. Here
every layer's KV lives in a pool of fixed shape [max_rows, kv_heads, max_tokens, head_dim]: a row owns a slot and its
KV sits at positions 0..n-1 of it (RoPE already applied, as in any cache). One step reads static inputs (the token,
RoPE position and KV length of every slot), writes each slot's new KV at its length, attends over the first `width`
positions (later ones masked) and writes the logits into a static buffer. Graphs are captured lazily per (rows
bucket, width bucket); a step pads its rows up to the bucket with dead slots whose results nobody reads.

The step is hand-written but calls the model's own modules (norms, projections, MLP), so it reads the served
parameter tensors: an in-place weight update (engine.weights.apply_weights) is seen by the captured graphs. A
parameter that moved (weights released and resumed) drops the graphs, which are captured again.

The same code runs eagerly (`GraphSettings.eager`): that is how the tests check it on a CPU.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import structlog
import torch

log = structlog.get_logger(__name__)

ROW_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
MIN_WIDTH = 128
"""Smallest width bucket; widths double from here (attention over up to 2x the positions, few graphs)."""
SUPPORTED = frozenset({"qwen3", "qwen2", "llama"})
"""Architectures whose decoder layer this step reproduces (pre-norm, RoPE, GQA; Qwen3's q / k norms when present)."""


@dataclass(frozen=True)
class GraphSettings:
    enabled: bool = True
    max_rows: int = 64
    """Rows the pool holds (a batch with more decodes eagerly)."""
    max_tokens: int = 4096
    """KV positions per row the pool holds (a row growing past it moves the batch back to the eager path)."""
    eager: bool = False
    """Run the static step without capturing graphs, on any device (tests on a CPU); serving leaves it off."""


class GraphUnavailable(RuntimeError):
    """Capturing failed (or the pool did not fit): this decoder is off for good, the batch decodes eagerly."""


def bucket(n: int, buckets: tuple[int, ...] = ROW_BUCKETS) -> int:
    return next((b for b in buckets if b >= n), n)


def width_bucket(n: int, limit: int) -> int:
    w = MIN_WIDTH
    while w < n:
        w *= 2
    return min(w, limit)


_DECODERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""Per served model: its StaticDecoder (pool and graphs), shared by the batches on that model, freed with it."""


def decoder_for(model: torch.nn.Module, settings: GraphSettings | None) -> StaticDecoder | None:
    """The model's static decoder when the settings and the model allow one (CUDA, or `eager`), else None."""
    if settings is None or not settings.enabled:
        return None
    dec = _DECODERS.get(model)
    if dec is not None and dec.settings == settings:
        return None if dec.broken else dec
    if dec is not None and not dec.free_for(None):
        return None  # another batch holds rows in the old pool
    device = next(model.parameters()).device
    if device.type != "cuda" and not settings.eager:
        return None
    try:
        reason = unsupported(model)
        dec = None if reason else StaticDecoder(model, settings)
    except Exception as exc:  # a model this step cannot read: it decodes eagerly, it is still served
        reason, dec = f"{type(exc).__name__}: {exc}", None
    if dec is None:
        log.info("decode steps stay eager (no CUDA graphs)", reason=reason)
        dec = _Off(settings)
    _DECODERS[model] = dec
    return None if dec.broken else dec


@dataclass
class _Off:
    """Registered for a model the static step does not cover, so it is looked at once."""

    settings: GraphSettings
    broken: bool = True
    owner: None = None

    def free_for(self, batch: object) -> bool:
        return True

    def free(self) -> None:
        pass


def unsupported(model: torch.nn.Module) -> str | None:
    cfg = model.config
    if cfg.model_type not in SUPPORTED:
        return f"architecture {cfg.model_type}"
    if getattr(cfg, "use_sliding_window", False):
        return "sliding-window attention"
    rotary = getattr(model.get_decoder(), "rotary_emb", None)
    if rotary is None or "dynamic" in str(getattr(rotary, "rope_type", "")) or "longrope" in str(rotary.rope_type):
        return "RoPE that changes with the length"
    return None


class StaticDecoder:
    def __init__(self, model: torch.nn.Module, settings: GraphSettings):
        # Modules, not the model: the registry's value must not keep its key alive.
        dec = model.get_decoder()
        self.settings = settings
        self.layers = list(dec.layers)
        self.embed, self.norm, self.head = dec.embed_tokens, dec.norm, model.get_output_embeddings()
        self.rotary = getattr(dec, "rotary_emb", None)
        self.params = list(model.parameters())
        cfg = model.config
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.broken = False
        self.owner: weakref.ref | None = None  # the batch whose rows are in the pool
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.graphs: dict[tuple[int, int], torch.cuda.CUDAGraph] = {}
        self._weights_at: tuple | None = None
        self._mempool = None
        self.captures = self.replays = 0

    # ---- ownership and memory ----------------------------------------------------------------------------------
    def free_for(self, batch: object) -> bool:
        holder = self.owner() if self.owner is not None else None
        return holder is None or holder is batch

    def claim(self, batch: object) -> None:
        self.owner = weakref.ref(batch)

    def release(self, batch: object) -> None:
        if self.owner is not None and self.owner() in (batch, None):
            self.owner = None

    def free(self) -> None:
        """Drop the pool and the graphs (that point into it); both come back on the next use."""
        self.keys, self.values, self.graphs, self._mempool, self._weights_at = [], [], {}, None, None
        self.owner = None

    def pool_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.keys + self.values)

    def _ensure_pool(self) -> None:
        if self.keys:
            return
        weight = self.embed.weight
        shape = (self.settings.max_rows, self.kv_heads, self.settings.max_tokens, self.head_dim)
        try:
            for _ in self.layers:
                self.keys.append(torch.zeros(shape, dtype=weight.dtype, device=weight.device))
                self.values.append(torch.zeros(shape, dtype=weight.dtype, device=weight.device))
            rows = self.settings.max_rows
            self.tokens = torch.zeros(rows, dtype=torch.long, device=weight.device)
            self.positions = torch.zeros(rows, dtype=torch.long, device=weight.device)
            self.lengths = torch.zeros(rows, dtype=torch.long, device=weight.device)
            self.out = torch.zeros((rows, self.head.weight.shape[0]), dtype=weight.dtype, device=weight.device)
        except RuntimeError as exc:  # out of memory
            self.free()
            self.broken = True
            log.warning("no memory for the CUDA-graph KV pool; decode steps stay eager", error=str(exc)[:200])
            raise GraphUnavailable(str(exc)) from exc

    # ---- moving KV in and out ----------------------------------------------------------------------------------
    def write_rows(self, slots: list[int], kv: list[tuple[torch.Tensor, torch.Tensor]], lens: list[int]) -> None:
        """Copy rows of a left-padded cache (per layer (K, V) [n, kv_heads, W, D]; row i's last lens[i] positions
        are its KV) into `slots`, from position 0 on."""
        self._ensure_pool()
        dev = self.keys[0].device
        width = kv[0][0].shape[2]
        longest = max(lens)
        lens_t = torch.tensor(lens, device=dev)
        src = (width - lens_t).unsqueeze(1) + torch.arange(longest, device=dev)  # [n, longest]
        src = src.clamp(max=width - 1)[:, None, :, None].expand(len(slots), self.kv_heads, longest, self.head_dim)
        index = torch.tensor(slots, device=dev)
        for pool_k, pool_v, (k, v) in zip(self.keys, self.values, kv):
            pool_k[index, :, :longest] = k.gather(2, src)
            pool_v[index, :, :longest] = v.gather(2, src)

    def read_rows(self, slots: list[int], lens: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The rows in `slots` as a left-padded cache (per layer (K, V) [n, kv_heads, max(lens), D], zeros where
        padded): what the eager path decodes from."""
        dev = self.keys[0].device
        width = max(lens)
        pad = width - torch.tensor(lens, device=dev).unsqueeze(1)  # [n, 1]
        at = torch.arange(width, device=dev).unsqueeze(0)
        src = (at - pad).clamp(min=0)[:, None, :, None].expand(len(slots), self.kv_heads, width, self.head_dim)
        valid = (at >= pad)[:, None, :, None]
        index = torch.tensor(slots, device=dev)
        out = []
        for pool_k, pool_v in zip(self.keys, self.values):
            k = pool_k[index, :, :width].gather(2, src)  # (advanced indexing: index_select is slow on a CPU)
            v = pool_v[index, :, :width].gather(2, src)
            out.append((torch.where(valid, k, 0), torch.where(valid, v, 0)))
        return out

    def row_kv(self, slot: int, length: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """One row's KV, per layer (K, V) [kv_heads, length, D] (views into the pool)."""
        return [(k[slot, :, :length], v[slot, :, :length]) for k, v in zip(self.keys, self.values)]

    def move(self, src: list[int], dst: list[int], width: int) -> None:
        """Move rows between slots (compaction: fewer slots in use, a smaller rows bucket)."""
        dev = self.keys[0].device
        s, d = torch.tensor(src, device=dev), torch.tensor(dst, device=dev)
        for pool in self.keys + self.values:
            view = pool[:, :, :width]
            view[d] = view[s]

    # ---- one step ----------------------------------------------------------------------------------------------
    def step(self, slots: list[int], tokens: torch.Tensor, positions: torch.Tensor, lens: list[int]) -> torch.Tensor:
        """Decode one token for the rows in `slots` (their input tokens, RoPE positions and KV lengths); their new KV
        goes in at position lens[i]. Returns their logits [n, V] (a copy)."""
        self._ensure_pool()
        dev = self.tokens.device
        rows = min(bucket(max(slots) + 1), self.settings.max_rows)
        width = width_bucket(max(lens) + 1, self.settings.max_tokens)
        index = torch.tensor(slots, device=dev)
        for buf, value in (
            (self.tokens, tokens),
            (self.positions, positions),
            (self.lengths, torch.tensor(lens, device=dev)),
        ):
            buf[:rows].zero_()  # dead slots: token 0 at position 0, written over their own slot only
            buf.index_copy_(0, index, value.to(buf.dtype))
        if self.settings.eager:
            self._forward(rows, width)
        else:
            self._graph(rows, width).replay()
            self.replays += 1
        return self.out[index]  # a copy (index_select: 10x slower on a CPU)

    def _graph(self, rows: int, width: int) -> torch.cuda.CUDAGraph:
        weights = tuple(p.data_ptr() for p in self.params)
        if weights != self._weights_at:
            if self.graphs:
                log.info("served weights moved; CUDA graphs are captured again")
            self.graphs, self._weights_at = {}, weights
        graph = self.graphs.get((rows, width))
        if graph is not None:
            return graph
        try:
            if self._mempool is None:
                self._mempool = torch.cuda.graph_pool_handle()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up off the capture (lazy inits, cuBLAS workspaces)
                self._forward(rows, width)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            # thread_local: CUDA work of other threads (a weight hand-off being read) must not break the capture
            with torch.cuda.graph(graph, pool=self._mempool, capture_error_mode="thread_local"):
                self._forward(rows, width)
        except Exception as exc:  # any failure: serve eagerly rather than not at all
            self.broken = True  # the batch moves its rows out of the pool, then frees it
            self.graphs = {}
            log.warning("CUDA graph capture failed; decode steps stay eager", rows=rows, width=width, error=str(exc))
            raise GraphUnavailable(str(exc)) from exc
        self.graphs[(rows, width)] = graph
        self.captures += 1
        log.debug("decode step captured", rows=rows, width=width, graphs=len(self.graphs))
        return graph

    def _forward(self, rows: int, width: int) -> None:
        """The decode step on the first `rows` slots, attending over the first `width` positions; only in-place
        writes to the pool and `out`, and fixed shapes, so that it can be captured."""
        ids, pos, lens = self.tokens[:rows], self.positions[:rows], self.lengths[:rows]
        h = self.embed(ids)  # [rows, hidden]
        dtype = h.dtype
        rotary = self.rotary
        freqs = pos[:, None].float() * rotary.inv_freq.float()[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = (emb.cos() * rotary.attention_scaling).to(dtype)[:, None, :]  # [rows, 1, D]
        sin = (emb.sin() * rotary.attention_scaling).to(dtype)[:, None, :]
        visible = torch.arange(width, device=ids.device)[None, :] <= lens[:, None]  # the new token's own KV too
        bias = torch.zeros(visible.shape, dtype=torch.float32, device=ids.device).masked_fill(~visible, float("-inf"))
        bias = bias[:, None, None, :]  # [rows, 1, 1, width]
        slot = torch.arange(rows, device=ids.device)
        groups = self.heads // self.kv_heads
        for layer, pool_k, pool_v in zip(self.layers, self.keys, self.values):
            attn = layer.self_attn
            x = layer.input_layernorm(h)
            q = attn.q_proj(x).view(rows, self.heads, self.head_dim)
            k = attn.k_proj(x).view(rows, self.kv_heads, self.head_dim)
            v = attn.v_proj(x).view(rows, self.kv_heads, self.head_dim)
            if getattr(attn, "q_norm", None) is not None:  # Qwen3
                q, k = attn.q_norm(q), attn.k_norm(k)
            q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
            pool_k[slot, :, lens] = k  # [rows, kv_heads, D] at each row's own length
            pool_v[slot, :, lens] = v
            keys, values = pool_k[:rows, :, :width], pool_v[:rows, :, :width]
            # query heads of one kv head side by side (repeat_kv's order), no copy of the keys
            qg = q.view(rows, self.kv_heads, groups, self.head_dim)
            scores = torch.matmul(qg, keys.transpose(-1, -2)).float() * attn.scaling + bias
            probs = torch.softmax(scores, dim=-1).to(dtype)
            o = torch.matmul(probs, values).reshape(rows, self.heads * self.head_dim)
            h = h + attn.o_proj(o)
            h = h + layer.mlp(layer.post_attention_layernorm(h))
        self.out[:rows].copy_(self.head(self.norm(h)))


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)
