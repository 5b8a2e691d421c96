"""In-process models for the engine tests: the tiny checkpoint at version 0, and a perturbed copy at version 1."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from engine.model_runner import LoadedModel, load_model


@pytest.fixture(scope="module")
def lm(tiny_model: Path) -> LoadedModel:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the engine processes of these tests: no thread oversubscription on a shared machine
    yield load_model(tiny_model, "cpu", "float32", weight_version="0")
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def lm_v1(tiny_model: Path) -> LoadedModel:
    """Other weights under version 1: what a weight swap brings."""
    new = load_model(tiny_model, "cpu", "float32", weight_version="1")
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in new.model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.05)
    return new
