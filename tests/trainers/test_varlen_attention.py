"""The variable-length attention path of packed rows (trainers/packing.py), on a CPU.

torch's varlen_attn runs only on CUDA, so here a reference function with its signature stands in for it: the glue
around it (the [1, H, T, D] -> [T, H, D] layout, cu_seqlens, causal, grouped-query heads, the scale, the way back)
is what runs, forward and backward, against attention computed sample by sample with nothing shared.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from trainers import packing

LAYER = SimpleNamespace(num_key_value_groups=2, is_causal=True, training=False)
"""What HF's SDPA fallback reads off an attention layer."""


def reference_varlen(q, k, v, cu_q, cu_k, max_q, max_k, *, scale=None, window_size=(-1, -1), enable_gqa=False):
    """What torch.nn.attention.varlen.varlen_attn computes ([T, H, D] in and out), written out."""
    assert window_size == (-1, 0), "packed rows must ask for causal attention"
    assert torch.equal(cu_q, cu_k) and cu_q.dtype == torch.int32 and int(cu_q[-1]) == q.shape[0]
    assert max_q == max_k == int((cu_q[1:] - cu_q[:-1]).max())
    if k.shape[1] != q.shape[1]:
        assert enable_gqa
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    dt = torch.promote_types(q.dtype, torch.float32)  # bf16 in, fp32 math, as the kernel accumulates
    out = []
    for a, b in zip(cu_q[:-1].tolist(), cu_q[1:].tolist()):
        s = torch.einsum("thd,uhd->htu", q[a:b].to(dt), k[a:b].to(dt)) * scale
        s = s.masked_fill(torch.ones(b - a, b - a, dtype=torch.bool).triu(1), float("-inf"))
        out.append(torch.einsum("htu,uhd->thd", s.softmax(-1), v[a:b].to(dt)))
    return torch.cat(out).to(q.dtype)


def older_varlen(q, k, v, cu_q, cu_k, max_q, max_k, *, scale=None, is_causal=False):
    """An older signature: is_causal instead of window_size, no grouped-query heads (the caller repeats them)."""
    assert is_causal and k.shape[1] == q.shape[1]
    return reference_varlen(q, k, v, cu_q, cu_k, max_q, max_k, scale=scale, window_size=(-1, 0))


def per_sample(q, k, v, lengths, scale):
    """[1, Hq, T, D] -> [1, T, Hq, D]: each sample causal by itself, through SDPA."""
    outs, at = [], 0
    for n in lengths:
        part = slice(at, at + n)
        outs.append(
            torch.nn.functional.scaled_dot_product_attention(
                q[:, :, part], k[:, :, part], v[:, :, part], is_causal=True, scale=scale, enable_gqa=True
            ).transpose(1, 2)
        )
        at += n
    return torch.cat(outs, dim=1)


@pytest.fixture
def varlen(monkeypatch):
    def use(fn):
        monkeypatch.setattr(packing, "_varlen_usable", lambda query: True)
        monkeypatch.setitem(packing._VARLEN, "fn", fn)
        monkeypatch.setitem(packing._VARLEN, "taken", 0)
        monkeypatch.setitem(packing._VARLEN, "ok", None)

    return use


@pytest.mark.parametrize("fn", [reference_varlen, older_varlen], ids=["window_size+gqa", "is_causal"])
@pytest.mark.parametrize("scale", [None, 0.37])
def test_packed_attention_through_varlen_equals_per_sample_attention_forward_and_backward(varlen, fn, scale):
    varlen(fn)
    lengths = (5, 1, 9, 3)
    g = torch.Generator().manual_seed(0)
    t = sum(lengths)
    q0 = torch.randn(1, 4, t, 16, generator=g, dtype=torch.float64)
    k0 = torch.randn(1, 2, t, 16, generator=g, dtype=torch.float64)  # grouped-query: 2 KV heads for 4 query heads
    v0 = torch.randn(1, 2, t, 16, generator=g, dtype=torch.float64)
    upstream = torch.randn(1, t, 4, 16, generator=g, dtype=torch.float64)

    def grads(attend):
        q, k, v = (x.clone().requires_grad_(True) for x in (q0, k0, v0))
        out = attend(q, k, v)
        (out * upstream).sum().backward()
        return out.detach(), q.grad, k.grad, v.grad

    got = grads(
        lambda q, k, v: packing.packed_attention(LAYER, q, k, v, None, scaling=scale, document_lengths=lengths)[0]
    )
    want = grads(lambda q, k, v: per_sample(q, k, v, lengths, scale))
    for name, a, b in zip(("output", "dq", "dk", "dv"), got, want):
        assert a.shape == b.shape, name
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9, msg=name)
    assert packing.varlen_calls() == 1  # the kernel served the packed row (its backward is the function's own)


def test_a_sample_does_not_see_the_one_before_it(varlen):
    varlen(reference_varlen)
    lengths = (4, 4)
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 8, 8, generator=g) for _ in range(3))
    out = packing.packed_attention(LAYER, q, k, v, None, document_lengths=lengths)[0]
    k2, v2 = k.clone(), v.clone()
    k2[:, :, :4] += 5.0  # change the first sample only
    v2[:, :, :4] -= 3.0
    out2 = packing.packed_attention(LAYER, q, k2, v2, None, document_lengths=lengths)[0]
    assert torch.equal(out[:, 4:], out2[:, 4:]) and not torch.equal(out[:, :4], out2[:, :4])


def test_a_row_of_one_sample_and_a_failing_kernel_fall_back_to_sdpa(varlen):
    def broken(*args, **kwargs):
        raise RuntimeError("no kernel for this GPU")

    varlen(broken)
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 2, 6, 8, generator=g) for _ in range(3))
    out = packing.packed_attention(LAYER, q, k, v, None, document_lengths=(2, 4))[0]
    torch.testing.assert_close(out, per_sample(q, k, v, (2, 4), None))
    assert packing._VARLEN["ok"] is False and packing.varlen_calls() == 0
    single = packing.packed_attention(LAYER, q, k, v, None, document_lengths=(6,))[0]
    torch.testing.assert_close(single, per_sample(q, k, v, (6,), None))
