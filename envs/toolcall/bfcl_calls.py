"""The agent's calls, run against one episode's live BFCL API instances (pure-Python simulations, in-process).

Instances are built as BFCL's executor builds them (`execute_multi_turn_func_call`):
the class from `CLASS_FILE_PATH_MAPPING`, `_load_scenario(deepcopy(initial_config),
long_context=...)` unless stateless, each public method owned by the last involved
class that has it. Results read back as BFCL shows them to a model (a str as is, a
dict as JSON, anything else `str()`, an exception as `Error during execution: ...`).
Calls are made directly (`getattr`), not through BFCL's executor, which `eval`s
call strings and keeps every instance in its module globals forever.

Each executed call is also recorded as the call string BFCL's FC handlers decode
(`name(k=repr(v),...)`), which BFCL's checker later replays. Before anything runs,
a call is checked so that string is safe to `eval` and the call cannot stall the
worker: parameter names must be identifiers, values plain JSON (finite numbers),
and a few MathAPI arguments that would make Python compute for minutes (an int
power's exponent, mpmath/decimal precision) are bounded. A refused call is never
executed, now or at checking.
"""

from __future__ import annotations

import copy
import decimal
import importlib
import inspect
import json
import keyword
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pydantic import BaseModel

from envs.toolcall.bfcl_data import BfclEntry

ARGUMENT_LIMITS: dict[tuple[str, str, str], float] = {
    ("MathAPI", "power", "exponent"): 10_000,
    ("MathAPI", "logarithm", "precision"): 1_000,
    ("MathAPI", "square_root", "precision"): 1_000,
}
"""(class, method, parameter) -> the largest magnitude accepted; BFCL's data stays far below these."""


class CallResult(BaseModel):
    content: str
    """What the agent reads back, as BFCL would show it."""
    error: bool
    """The call raised, was refused, or the API answered with an `error` field."""
    recorded: str | None
    """The call string for BFCL's checker when the call ran (None: refused, nothing ran)."""


class ApiSession:
    """The live API instances of one episode."""

    def __init__(self, entry: BfclEntry):
        from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING, STATELESS_CLASSES

        self.instances: dict[str, Any] = {}
        self.owner: dict[str, str] = {}
        """Public method name -> the class whose instance runs it."""
        for class_name in entry.involved_classes:
            instance = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name]), class_name)()
            if class_name not in STATELESS_CLASSES:
                scenario = copy.deepcopy(entry.initial_config.get(class_name, {}))
                instance._load_scenario(scenario, long_context=entry.long_context)
            self.instances[class_name] = instance
            for name, _ in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not name.startswith("_"):
                    self.owner[name] = class_name

    def call(self, name: str, arguments: dict[str, Any]) -> CallResult:
        class_name = self.owner.get(name)
        if class_name is None:
            return CallResult(
                content=f"Error: no function named {name!r}; call one of the functions you were given",
                error=True,
                recorded=None,
            )
        problem = argument_problem(class_name, name, arguments)
        if problem:
            return CallResult(content=f"Error: {problem}", error=True, recorded=None)
        recorded = call_string(name, arguments)
        method = getattr(self.instances[class_name], name)
        with numeric_state_kept():
            try:
                result = method(**copy.deepcopy(arguments))
                text = result_text(result)
            except Exception as e:  # the simulated API's reaction to bad arguments, exactly as BFCL reports it
                return CallResult(content=f"Error during execution: {e}", error=True, recorded=recorded)
        return CallResult(content=text, error=isinstance(result, dict) and "error" in result, recorded=recorded)


def call_string(name: str, arguments: dict[str, Any]) -> str:
    """The call as BFCL's `convert_to_function_call` writes a decoded FC tool call."""
    return f"{name}({','.join(f'{k}={v!r}' for k, v in arguments.items())})"


def result_text(result: Any) -> str:
    """A call's return value as BFCL's executor turns it into the tool message."""
    if type(result) is str:
        return result
    if type(result) is dict:
        try:
            return json.dumps(result)
        except (TypeError, ValueError):  # mpmath numbers, Decimals, sets: BFCL falls back to str()
            return str(result)
    return str(result)


def argument_problem(class_name: str, name: str, arguments: dict[str, Any]) -> str | None:
    """Why these arguments may not be run (a message for the agent), or None."""
    for key, value in arguments.items():
        if not isinstance(key, str) or not key.isidentifier() or keyword.iskeyword(key):
            return f"{key!r} is not a parameter name of {name}"
        if not _plain_json(value):
            return f"the value of {key} is not a plain JSON value (finite numbers, strings, booleans, lists, objects)"
        limit = ARGUMENT_LIMITS.get((class_name, name, key))
        if limit is not None and isinstance(value, int | float) and abs(value) > limit:
            return f"{key}={value} is out of the range this environment runs (at most {limit:g} in magnitude)"
    return None


@contextmanager
def numeric_state_kept() -> Iterator[None]:
    """Undo what MathAPI sets process-wide: `decimal`'s precision (per thread) and `mpmath.mp.dps` (global)."""
    mpmath = sys.modules.get("mpmath")
    dps = mpmath.mp.dps if mpmath is not None else None
    try:
        with decimal.localcontext():
            yield
    finally:
        if mpmath is not None and dps is not None:
            mpmath.mp.dps = dps


def _plain_json(value: Any) -> bool:
    if value is None or isinstance(value, bool | int | str):
        return True
    if isinstance(value, float):
        return math.isfinite(value)  # repr(inf) is `inf`, which BFCL's replay would not read back as a number
    if isinstance(value, list):
        return all(_plain_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain_json(v) for k, v in value.items())
    return False
