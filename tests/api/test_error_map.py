"""One map from a workflow failure's type to the HTTP status and code a client sees, for turns and episodes."""

from __future__ import annotations

import pytest

from api import episodes, session_gateway
from api.errors import ERROR_STATUS
from api.session_gateway import turn_error
from contracts.errors import ErrorType


def test_turns_and_episodes_read_the_same_map():
    assert episodes.ERROR_STATUS is session_gateway.ERROR_STATUS is ERROR_STATUS


@pytest.mark.parametrize(
    "kind, status, code",
    [
        (ErrorType.PROMPT_TOO_LONG, 400, "context_length_exceeded"),
        (ErrorType.INVALID_REQUEST, 400, "invalid_request"),
        (ErrorType.EPISODE_NOT_YOURS, 404, "episode_not_found"),
        (ErrorType.ENV_LOST, 409, "episode_conflict"),
        (ErrorType.POLICY_UNAVAILABLE, 503, "policy_unavailable"),
        (ErrorType.STORAGE_FULL, 503, "storage_full"),
        (ErrorType.REQUEST_MISSING, 503, "request_lost"),
    ],
)
def test_a_failure_type_is_one_status_and_code(kind, status, code):
    error = turn_error(kind, "why")
    assert (error.status, error.code) == (status, code)


def test_an_unknown_type_is_a_server_error_and_a_passing_store_failure_says_what_to_do():
    assert (turn_error("Boom", "why").status, turn_error(None, "why").code) == (500, "turn_failed")
    full = turn_error(ErrorType.STORAGE_FULL, "no room")
    assert full.message.startswith("the server's storage is full") and full.message.endswith("Reason: no room")
