"""The project's custom search attributes, so the Web UI and CLI can filter by user, session and policy.

Kept apart from the client factory: workflow code sets them and must not import the client's settings.
"""

from __future__ import annotations

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

USER_ID = SearchAttributeKey.for_keyword("OpenclawUser")
SESSION_ID = SearchAttributeKey.for_keyword("OpenclawSession")
POLICY_VERSION = SearchAttributeKey.for_int("OpenclawPolicyVersion")
SETTING = SearchAttributeKey.for_keyword("OpenclawSetting")
"""General-agent episodes, groups and rollouts: terminal, toolcall."""
TASK_ID = SearchAttributeKey.for_keyword("OpenclawTask")
OUTCOME = SearchAttributeKey.for_float("OpenclawOutcome")
"""An episode's outcome (a group's mean outcome), set when it ends."""
EVAL_SETS = SearchAttributeKey.for_keyword_list("OpenclawEvalSet")
"""An evaluation's sets (`personalization-student`, `user-<name>`); its version is OpenclawPolicyVersion."""
SEARCH_ATTRIBUTES = {
    USER_ID.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    SESSION_ID.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    POLICY_VERSION.name: IndexedValueType.INDEXED_VALUE_TYPE_INT,
    SETTING.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    TASK_ID.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    OUTCOME.name: IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE,
    EVAL_SETS.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
}


def of_task(setting: str, task_id: str, *more: SearchAttributePair) -> TypedSearchAttributes:
    """A task group's or an episode's attributes, set by whoever starts it: part of the start, not an upsert (one
    billable action) of its own."""
    return TypedSearchAttributes([SearchAttributePair(SETTING, setting), SearchAttributePair(TASK_ID, task_id), *more])


def missing(key: SearchAttributeKey) -> bool:
    """Workflow code: the run was started without `key` (deterministic: read from its start event)."""
    from temporalio import workflow

    return workflow.info().typed_search_attributes.get(key) is None
