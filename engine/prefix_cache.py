"""Prefix cache of the embedded engine: KV state of token prefixes shared across requests (SGLang's RadixAttention,
in blocks).

A trie over token ids whose edges are blocks of `BLOCK_TOKENS` tokens: each node holds the keys and values of its
block for every layer ([kv_heads, BLOCK_TOKENS, head_dim], contiguous copies, never views into a batch's cache).
A prompt whose first k blocks are in the trie reuses their KV and is prefilled from token 16k on. Requests that
share a system prompt share its nodes; a session's next turn (the previous prompt, the answer, a new message)
finds the previous turn's prompt and answer, inserted when that turn finished.

Eviction: least recently used first, leaves only, while the stored bytes pass the budget. Every lookup and insert
touches its path from the deepest node up to the root, so a parent is always more recent than its children and the
least recent node is a leaf: eviction never orphans a subtree.

Invalidation: a weight update bumps `generation` and empties the trie. A batch remembers the generation it was
made for; lookups and inserts of another generation (rows still draining on the old weights) do nothing, so the old
model's KV can neither be read by the new one nor leak into its cache.

Thread-safety: the engine thread looks up and inserts; the HTTP side flushes and reads the statistics; one lock.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict

import torch

BLOCK_TOKENS = 16
"""Tokens per trie edge: hits are whole blocks (a partial last block is recomputed, never stored)."""

KV = list[tuple[torch.Tensor, torch.Tensor]]
"""Per layer (keys, values)."""


AUTO_TOKENS = 65_536
"""On CUDA, the default budget holds this many tokens of the served model's KV (engine.prefix_cache_mb None)."""
AUTO_GPU_SHARE = 0.15
AUTO_CPU_MB = 512


def kv_bytes_per_token(config, dtype: torch.dtype) -> int:
    """Keys and values of one token over every layer, for a Hugging Face decoder config."""
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return 2 * config.num_hidden_layers * kv_heads * head_dim * torch.empty((), dtype=dtype).element_size()


def budget_bytes(configured_mb: float | None, config, dtype: torch.dtype, device: torch.device) -> int:
    """`engine.prefix_cache_mb` in bytes; None picks one for the device (see the setting)."""
    if configured_mb is not None:
        return int(configured_mb * 1024 * 1024)
    if device.type != "cuda":
        return AUTO_CPU_MB * 1024 * 1024
    total = torch.cuda.get_device_properties(device).total_memory
    return int(min(kv_bytes_per_token(config, dtype) * AUTO_TOKENS, total * AUTO_GPU_SHARE))


class _Node:
    __slots__ = ("id", "parent", "key", "kv", "children", "nbytes")

    def __init__(self, node_id: int, parent: "_Node | None", key: tuple[int, ...], kv: KV):
        self.id, self.parent, self.key, self.kv = node_id, parent, key, kv
        self.children: dict[tuple[int, ...], _Node] = {}
        self.nbytes = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in kv)


class PrefixCache:
    def __init__(self, budget_bytes: int, block_tokens: int = BLOCK_TOKENS):
        self.budget = max(0, int(budget_bytes))
        self.block = block_tokens
        self.generation = 0
        self._root = _Node(0, None, (), [])
        self._lru: OrderedDict[int, _Node] = OrderedDict()  # last = most recently used
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._walks: dict[int, tuple[list[int], int, int, list[_Node], str | None]] = {}
        """id(ids) -> (ids, len(ids), limit, path, namespace) since the trie last changed: admission asks about the
        same prompt up to three times (chunking, grouping, the KV itself), and a walk of an 8,000-token prompt builds
        and hashes 500 block keys."""
        self.bytes = 0
        # statistics (cumulative over the engine's life)
        self.requests = 0
        self.hit_requests = 0
        self.prompt_tokens = 0
        self.cached_tokens = 0
        self.evicted_blocks = 0

    @property
    def enabled(self) -> bool:
        return self.budget > 0

    @property
    def blocks(self) -> int:
        return len(self._lru)

    # ---- lookups -----------------------------------------------------------------------------------------------
    def match(
        self, ids: list[int], limit: int, generation: int, start: int = 0, namespace: str | None = None
    ) -> tuple[int, KV | None]:
        """Longest cached prefix of ids[:limit] in whole blocks: (tokens, per layer (K, V) [1, heads, tokens - start,
        dim] of the tokens from `start` on, a multiple of the block; None when that is nothing). `namespace`: whose
        KV (a LoRA adapter's key; None: the base model's): KV of one namespace never serves another."""
        if not self.enabled or limit < self.block:
            return 0, None
        with self._lock:
            if generation != self.generation:
                return 0, None
            path = self._walk(ids, limit, namespace)
            if not path:
                return 0, None
            self._touch(path)
            layers = len(path[0].kv)
            tail = path[start // self.block :]
            if not tail:
                return len(path) * self.block, None
            kv = [
                (
                    torch.cat([n.kv[i][0] for n in tail], dim=1).unsqueeze(0),
                    torch.cat([n.kv[i][1] for n in tail], dim=1).unsqueeze(0),
                )
                for i in range(layers)
            ]
        return len(path) * self.block, kv

    def match_len(self, ids: list[int], limit: int, generation: int, namespace: str | None = None) -> int:
        """How many leading tokens of ids[:limit] `match` would give, without copying their KV."""
        if not self.enabled or limit < self.block:
            return 0
        with self._lock:
            return 0 if generation != self.generation else len(self._walk(ids, limit, namespace)) * self.block

    def _walk(self, ids: list[int], limit: int, namespace: str | None = None) -> list[_Node]:
        memo = self._walks.get(id(ids))
        if memo is not None and memo[0] is ids and memo[1] == len(ids) and memo[2] == limit and memo[4] == namespace:
            return memo[3]
        path = self._walk_trie(ids, limit, namespace)
        if len(self._walks) >= 1024:
            self._walks.clear()
        self._walks[id(ids)] = (ids, len(ids), limit, path, namespace)
        return path

    def _key(self, ids: list[int], start: int, namespace: str | None) -> tuple:
        """A block's trie key; the first block of a namespace's prompt carries the namespace (LoRA adapters' KV
        hangs in their own subtrees, the base model's keys are the plain tokens)."""
        key = tuple(ids[start : start + self.block])
        return (namespace, *key) if namespace is not None and start == 0 else key

    def _changed(self) -> None:
        """The trie gained or lost nodes: remembered walks may be too short or name removed nodes."""
        self._walks.clear()

    def _walk_trie(self, ids: list[int], limit: int, namespace: str | None = None) -> list[_Node]:
        path: list[_Node] = []
        node = self._root
        for start in range(0, limit - self.block + 1, self.block):
            child = node.children.get(self._key(ids, start, namespace))
            if child is None:
                break
            path.append(child)
            node = child
        return path

    def _touch(self, path: list[_Node]) -> None:
        for node in reversed(path):  # deepest first: the root end of the path ends up most recent
            self._lru.move_to_end(node.id)

    # ---- inserts -----------------------------------------------------------------------------------------------
    def insert(self, ids: list[int], kv: KV, generation: int, offset: int = 0, namespace: str | None = None) -> int:
        """Store the KV of ids' whole blocks; `kv`: per layer (K, V) [heads, >= len(ids) rounded down - offset, dim]
        of exactly these tokens from position `offset` (a multiple of the block: the blocks before it are expected in
        the trie already; where one is missing nothing deeper is stored). Returns the blocks added."""
        if not self.enabled:
            return 0
        n_blocks = len(ids) // self.block
        if not n_blocks:
            return 0
        added = 0
        with self._lock:
            if generation != self.generation:
                return 0
            node, path = self._root, []
            for b in range(n_blocks):
                s, e = b * self.block, (b + 1) * self.block
                key = self._key(ids, s, namespace)
                child = node.children.get(key)
                if child is None and s < offset:
                    break  # evicted meanwhile; its KV is not in `kv`
                if child is None:
                    a, z = s - offset, e - offset
                    block_kv = [(k[:, a:z].contiguous().clone(), v[:, a:z].contiguous().clone()) for k, v in kv]
                    child = _Node(next(self._ids), node, key, block_kv)
                    node.children[key] = child
                    self._lru[child.id] = child
                    self.bytes += child.nbytes
                    added += 1
                    self._changed()
                path.append(child)
                node = child
            self._touch(path)
            self._evict()
        return added

    def _evict(self) -> None:
        while self.bytes > self.budget and self._lru:
            victim = next((n for n in self._lru.values() if not n.children), None)
            if victim is None:  # cannot happen while parents are more recent than children; never loop forever
                break
            del self._lru[victim.id]
            del victim.parent.children[victim.key]
            self._changed()
            self.bytes -= victim.nbytes
            self.evicted_blocks += 1

    # ---- statistics and control --------------------------------------------------------------------------------
    def record(self, prompt_tokens: int, cached_tokens: int) -> None:
        with self._lock:
            self.requests += 1
            self.prompt_tokens += prompt_tokens
            self.cached_tokens += cached_tokens
            self.hit_requests += cached_tokens > 0

    def clear(self) -> None:
        """Drop every stored block (POST /flush_cache); the statistics stay."""
        with self._lock:
            self._root.children.clear()
            self._lru.clear()
            self._changed()
            self.bytes = 0

    def invalidate(self) -> None:
        """New weights: empty the cache and refuse the old generation's lookups and inserts from now on."""
        with self._lock:
            self.generation += 1
            self._root.children.clear()
            self._lru.clear()
            self._changed()
            self.bytes = 0

    def stats(self) -> dict:
        with self._lock:
            return {
                "enabled": self.enabled,
                "budget_bytes": self.budget,
                "bytes": self.bytes,
                "cached_blocks": len(self._lru),
                "cached_block_tokens": len(self._lru) * self.block,
                "block_tokens": self.block,
                "requests": self.requests,
                "hit_requests": self.hit_requests,
                "request_hit_rate": round(self.hit_requests / self.requests, 6) if self.requests else 0.0,
                "prompt_tokens": self.prompt_tokens,
                "cached_tokens": self.cached_tokens,
                "token_hit_rate": round(self.cached_tokens / self.prompt_tokens, 6) if self.prompt_tokens else 0.0,
                "evicted_blocks": self.evicted_blocks,
                "generation": self.generation,
            }
