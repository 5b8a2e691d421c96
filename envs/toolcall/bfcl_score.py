"""An episode's BFCL verdict, from BFCL's own multi-turn checker.

BFCL v4 scores a multi-turn entry (`eval_runner._evaluate_single_multi_turn_entry`)
in two parts, both followed here:
1. an episode that did not reach every turn (BFCL: the model was force-terminated)
   fails outright;
2. `multi_turn_checker` replays the model's decoded calls turn by turn on fresh
   instances and the ground-truth calls on others, and after every turn whose
   ground truth is not empty requires a non-empty model turn, equal public state of
   every instance (`state_checker`), and every ground-truth result among the
   model's results so far (`response_checker`).
(BFCL's `multi_turn_irrelevance_checker` is imported by its runner but never
called in this version, so it is not applied.)

The checker keeps its instances in `multi_turn_utils`' module globals under names
built from the model name; each check uses a name of its own and removes its
instances afterwards, or a long-lived env worker would keep every episode's.
"""

from __future__ import annotations

import uuid

from pydantic import BaseModel

from envs.toolcall.bfcl_calls import numeric_state_kept
from envs.toolcall.bfcl_data import BfclEntry


class Verdict(BaseModel):
    valid: bool
    error_type: str = ""
    """BFCL's error type (`multi_turn:instance_state_mismatch`, ...), empty when valid."""
    message: str = ""


def check(entry: BfclEntry, model_turns: list[list[list[str]]]) -> Verdict:
    """BFCL's verdict on `model_turns`: per turn reached, per step that made calls, the calls as BFCL strings."""
    if len(model_turns) != len(entry.ground_truth):
        return Verdict(
            valid=False,
            error_type="multi_turn:force_terminated",
            message=f"the episode reached {len(model_turns)} of {len(entry.ground_truth)} turns",
        )
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    model_name = f"openclaw_{uuid.uuid4().hex}"
    try:
        with numeric_state_kept():
            result = multi_turn_checker(
                model_turns, entry.ground_truth, entry.checker_entry(), entry.category, model_name
            )
    finally:
        held = vars(multi_turn_utils)
        for key in [k for k in held if k.startswith(model_name)]:
            held.pop(key, None)
    if result["valid"]:
        return Verdict(valid=True)
    return Verdict(valid=False, error_type=result.get("error_type", ""), message=result.get("error_message", ""))
