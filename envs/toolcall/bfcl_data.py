"""BFCL v4 multi-turn data, read from the installed `bfcl-eval` package (nothing of it is copied into this repo).

What is used of the package, and why only this:
- `data/BFCL_v4_<category>.json` (questions, initial API states, involved classes, held-out functions),
  `data/possible_answer/BFCL_v4_<category>.json` (ground-truth call sequences, one list per turn) and
  `data/multi_turn_func_doc/*.json` (each API class's function docs), read as JSON lines;
- `constants.executable_backend_config` (class -> module and class -> doc file maps, stateless classes),
  `constants.type_mappings.GORILLA_TO_OPENAPI` and `constants.default_prompts` (BFCL's own prompt text).
These import nothing beyond the standard library. `bfcl_eval.utils` (BFCL's own loader) is avoided: importing
it pulls `constants.eval_config`, which creates result/score/lock folders inside site-packages, and it takes
file locks to read; `model_handler.utils` (BFCL's schema converter) needs tree-sitter and the hosted-model SDKs.
Its loader and converter are small, so they are mirrored here (`_entry`, `openai_tool`).
"""

from __future__ import annotations

import copy
import importlib.util
import json
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel

BFCL_VERSION = "2026.3.23"
INSTALL_HINT = f"pip install --no-deps bfcl-eval=={BFCL_VERSION}"
CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
"""BFCL v4's multi-turn categories: all four share one format, one executor and one checker."""


class BfclUnavailable(RuntimeError):
    """The `bfcl-eval` package (or its data) is not installed here."""


class BfclEntry(BaseModel):
    """One BFCL multi-turn test entry with its ground truth, as BFCL's inference loop and checker read it."""

    id: str
    """BFCL's id, e.g. `multi_turn_base_12`; its category is everything before the last `_`."""
    category: str
    turns: list[list[dict[str, Any]]]
    """The user messages of each turn; a held-out-function turn of `miss_func` is empty (BFCL fills it in)."""
    initial_config: dict[str, Any]
    """Per API class, the scenario loaded into a fresh instance (`_load_scenario`)."""
    involved_classes: list[str]
    functions: list[dict[str, Any]]
    """The function docs offered from the first turn (BFCL format), held-out ones removed."""
    held_out: dict[int, list[dict[str, Any]]]
    """`miss_func`: turn index -> the docs that become available at that turn."""
    ground_truth: list[list[str]]
    """Per turn, the calls that solve it, as Python call strings (`cd(folder='document')`)."""

    @property
    def long_context(self) -> bool:
        """BFCL loads long-context scenarios (extra files, messages, ...) for these, in inference and checking alike."""
        return "long_context" in self.category or "composite" in self.category

    def checker_entry(self) -> dict[str, Any]:
        """The fields of the raw entry that BFCL's `multi_turn_checker` reads."""
        return {"id": self.id, "initial_config": self.initial_config, "involved_classes": self.involved_classes}


def bfcl_problem() -> str | None:
    """Why BFCL tasks cannot be used here, or None when they can."""
    if importlib.util.find_spec("bfcl_eval") is None:
        return f"bfcl-eval is not installed: `{INSTALL_HINT}` (without its dependencies)"
    missing = [c for c in CATEGORIES if not (data_dir() / f"BFCL_v4_{c}.json").is_file()]
    if missing:
        return f"the installed bfcl-eval has no data for {', '.join(missing)}: install bfcl-eval=={BFCL_VERSION}"
    return None


def require_bfcl() -> None:
    why = bfcl_problem()
    if why:
        raise BfclUnavailable(why)


@cache
def data_dir() -> Path:
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise BfclUnavailable(f"bfcl-eval is not installed: `{INSTALL_HINT}`")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


@cache
def load(category: str) -> tuple[BfclEntry, ...]:
    """The entries of one multi-turn category, in file order, with their ground truth and function docs."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown BFCL category {category!r}: one of {', '.join(CATEGORIES)}")
    require_bfcl()
    questions = _json_lines(data_dir() / f"BFCL_v4_{category}.json")
    answers = {
        a["id"]: a["ground_truth"] for a in _json_lines(data_dir() / "possible_answer" / f"BFCL_v4_{category}.json")
    }
    return tuple(_entry(raw, category, answers[raw["id"]]) for raw in questions)


@cache
def class_docs(class_name: str) -> tuple[dict[str, Any], ...]:
    """BFCL's function docs of one API class (BFCL format: `parameters.type` is `dict`)."""
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

    return tuple(_json_lines(data_dir() / "multi_turn_func_doc" / MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name]))


def openai_tool(doc: dict[str, Any]) -> dict[str, Any]:
    """A BFCL function doc as an OpenAI tool: BFCL's `convert_to_tool` for OpenAI chat completions, mirrored.

    BFCL types become JSON-schema types (`dict` -> object, `float` -> number with format float, `tuple` -> array,
    `any` -> string). BFCL keeps its non-standard `response` field in the function for OpenAI; a chat template
    renders unknown fields unevenly, so here it goes into the description, as BFCL does for Anthropic and Gemini.
    """
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI

    item = copy.deepcopy(doc)
    item["parameters"]["type"] = "object"
    item["parameters"]["properties"] = _cast_types(item["parameters"].get("properties", {}), GORILLA_TO_OPENAPI)
    response = item.pop("response", None)
    if response:
        item["description"] += f" The response field has the following schema: {json.dumps(response)}"
    return {"type": "function", "function": item}


def _cast_types(properties: dict[str, Any], mapping: dict[str, str]) -> dict[str, Any]:
    """BFCL's `_cast_to_openai_type`: map types, recursing into object properties and (nested) array items."""
    for value in properties.values():
        kind = value.get("type")
        if kind == "float":
            value["format"] = "float"
            value["description"] = value.get("description", "") + " This is a float type value."
        value["type"] = mapping.get(kind, "string") if kind else "string"
        if value["type"] in ("array", "object"):
            if "properties" in value:
                value["properties"] = _cast_types(value["properties"], mapping)
            elif "items" in value:
                _cast_items(value["items"], mapping)
    return properties


def _cast_items(items: dict[str, Any], mapping: dict[str, str]) -> None:
    items["type"] = mapping.get(items.get("type", ""), "string")
    if items["type"] == "array" and "items" in items:
        _cast_items(items["items"], mapping)
    elif items["type"] == "object" and "properties" in items:
        items["properties"] = _cast_types(items["properties"], mapping)


def _entry(raw: dict[str, Any], category: str, ground_truth: list[list[str]]) -> BfclEntry:
    """BFCL's `populate_test_cases_with_predefined_functions`: docs of the involved classes, held-out ones apart.

    BFCL ignores the entries' `excluded_function` field (no code reads it), so it is ignored here too.
    """
    functions = [dict(doc) for cls in raw["involved_classes"] for doc in class_docs(cls)]
    held_out: dict[int, list[dict[str, Any]]] = {}
    for turn, names in raw.get("missed_function", {}).items():
        for name in names:
            index = next((i for i, doc in enumerate(functions) if doc["name"] == name), None)
            if index is not None:  # BFCL skips a held-out name with no doc the same way
                held_out.setdefault(int(turn), []).append(functions.pop(index))
    return BfclEntry(
        id=raw["id"],
        category=category,
        turns=raw["question"],
        initial_config=raw.get("initial_config", {}),
        involved_classes=raw["involved_classes"],
        functions=functions,
        held_out=held_out,
        ground_truth=ground_truth,
    )


def _json_lines(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
