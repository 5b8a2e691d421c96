"""Batched generation and scoring on a Hugging Face causal LM.

A `DecodeBatch` prefills requests, decodes them step by step with a KV cache,
and lets new requests join and finished (or abandoned) ones leave between steps
(continuous batching); each row keeps its own sampling parameters, stop
conditions and token budget.

Prefill never pads one prompt to another's length: requests admitted together
are prefilled per prompt length (equal lengths share one forward pass), then
merged into the batch, so a short prompt never pays for a long one's prefill.
Log-probs follow `rlmath.logprobs` (the convention the trainer uses too).

Each part has its own module; this one re-exports them for the callers that import from here:
  engine.weights    loading a checkpoint, weight specs, in-place weight updates (`LoadedModel`, `load_model`)
  engine.work       requests and answers (`WorkItem`, `WorkResult`) and a request's decoding state (`_Row`)
  engine.sampling   the LM head in chunks, the per-row draw, top alternatives
  engine.prefill    prompts' forward pass and input log-probs; a chunked prompt's state
  engine.admission  requests joining a batch: prefix-cache lookups, shared prefix set-up, chunked prefill
  engine.decode     `DecodeBatch`: the decode step and rows leaving the batch
"""

from engine.decode import DecodeBatch
from engine.sampling import CDF_BLOCK, LM_HEAD_CHUNK, _sample
from engine.weights import LoadedModel, ModelLoadError, WeightSpec, apply_weights, load_model, weight_specs
from engine.work import WorkItem, WorkResult, aborted_before_start, final_delta, merged_deltas

__all__ = [
    "CDF_BLOCK",
    "LM_HEAD_CHUNK",
    "DecodeBatch",
    "LoadedModel",
    "ModelLoadError",
    "WeightSpec",
    "WorkItem",
    "WorkResult",
    "_sample",  # tests/engine/test_sampling.py draws with it directly
    "aborted_before_start",
    "apply_weights",
    "final_delta",
    "load_model",
    "merged_deltas",
    "weight_specs",
]
