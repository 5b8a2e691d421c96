"""The served model's linears through oneDNN with packed weights, against their plain forward."""

from __future__ import annotations

import pytest
import torch

from engine import cpu_linears
from engine.cpu_linears import forget_packed, pack_linears

pytestmark = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="this torch build has no oneDNN")


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 5000, bias=False))


def _plain(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    a, act, b = model
    return torch.nn.functional.linear(act(torch.nn.functional.linear(x, a.weight, a.bias)), b.weight)


@pytest.mark.parametrize("shape", [(1, 64), (4, 64), (16, 64), (600, 64), (3, 7, 64)])
def test_outputs_equal_the_plain_forward(shape):
    model = _model()
    assert pack_linears(model) == 2
    x = torch.randn(*shape)
    with torch.inference_mode():
        got, want = model(x), _plain(model, x)
    assert got.shape == want.shape == (*shape[:-1], 5000)
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-5), (got - want).abs().max()
    rows = x.numel() // x.shape[-1]
    # the packed path ran, except for one row (a matrix-vector product stays on the default kernel)
    assert all(("_onednn_packed" in m.__dict__) == (rows > 1) for m in (model[0], model[2]))
    assert "_onednn_packed" not in str(model.state_dict().keys())


def test_a_strided_view_projects_like_its_copy():
    model = _model()
    pack_linears(model)
    x = torch.randn(8, 5, 64)[:, -1]  # a decode step's last position: not contiguous
    with torch.no_grad():
        assert torch.allclose(model(x), _plain(model, x.contiguous()), atol=1e-5, rtol=1e-5)


def test_an_in_place_weight_update_is_seen_by_the_next_forward():
    model = _model()
    pack_linears(model)
    x = torch.randn(4, 64)
    with torch.inference_mode():
        before = model(x)
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.05)  # what update_weights_* does to the served model
        after = model(x)
        assert torch.allclose(after, _plain(model, x), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(before, after)


def test_with_autograd_on_a_layer_runs_its_plain_forward():
    model = _model()
    pack_linears(model)
    x = torch.randn(3, 64, requires_grad=True)
    model(x).sum().backward()
    assert x.grad is not None and model[0].weight.grad is not None
    assert "_onednn_packed" not in model[0].__dict__


def test_small_layers_stay_plain():
    model = torch.nn.Sequential(torch.nn.Linear(64, 192), torch.nn.Linear(192, 5000))
    assert pack_linears(model) == 1  # only the 192 x 5000 one
    assert "forward" not in model[0].__dict__ and "forward" in model[1].__dict__


def test_a_write_that_bypasses_the_version_counter_is_seen_after_forget_packed():
    model = _model()
    pack_linears(model)
    x = torch.randn(4, 64)
    with torch.inference_mode():
        model(x)
        for p in model.parameters():
            p.data.copy_(torch.randn_like(p) * 0.05)  # `.data` writes do not bump the version the cache checks
        forget_packed(model)
        assert torch.allclose(model(x), _plain(model, x), atol=1e-5, rtol=1e-5)


def test_an_input_the_op_refuses_falls_back_for_that_call_only(monkeypatch):
    model = _model()
    pack_linears(model)
    real = torch.ops.mkldnn._linear_pointwise
    calls = []

    def refusing_once(*args):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("could not create a primitive")
        return real(*args)

    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", refusing_once)
    x = torch.randn(4, 64)
    with torch.inference_mode():
        assert torch.allclose(model(x), _plain(model, x), atol=1e-5, rtol=1e-5)
        model(x)
    assert len(calls) == 4  # the packed path was still taken after the refusal
    assert not cpu_linears._BROKEN
