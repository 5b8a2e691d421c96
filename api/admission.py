"""Caps on chat requests in flight (HTTP 429 beyond them): per user, and per session.

The session cap mirrors Temporal's: a workflow admits at most
`history.maxInFlightUpdates` (default 10) updates at once, and every turn is an
update on its session's workflow. Temporal's refusal reaches the API only after
its client has retried it for about 15 s, so the API refuses the extra turn
itself, at once; api.session_gateway still maps Temporal's refusal to the same
429 should one get through (another API process, a lower server limit).
"""

from __future__ import annotations

from collections import Counter, defaultdict

from api.errors import ApiError

SESSION_MAX_INFLIGHT = 10
"""Turns in flight per session: Temporal's default `history.maxInFlightUpdates` per workflow."""


def session_busy() -> ApiError:
    return ApiError(
        429,
        f"too many requests in flight on this session (at most {SESSION_MAX_INFLIGHT} turns of one session run or "
        "wait at once); retry when one finishes",
        code="session_busy",
    )


class Admission:
    def __init__(self, max_per_user: int, max_per_session: int = SESSION_MAX_INFLIGHT):
        self.max_per_user = max_per_user
        self.max_per_session = max_per_session
        self.in_flight: Counter[str] = Counter()
        self.session_turns: defaultdict[str, Counter[str]] = defaultdict(Counter)
        """Session workflow id -> turn id -> requests on it (retries with one Idempotency-Key share a turn)."""

    def acquire(self, user_id: str, session_key: str, turn_id: str) -> None:
        if self.in_flight[user_id] >= self.max_per_user:
            raise ApiError(
                429,
                f"{self.max_per_user} requests of user {user_id} are already in flight (api.max_inflight_per_user); "
                "retry when one finishes",
                code="too_many_requests",
            )
        turns = self.session_turns.get(session_key, Counter())
        if turn_id not in turns and len(turns) >= self.max_per_session:
            raise session_busy()
        self.in_flight[user_id] += 1
        self.session_turns[session_key][turn_id] += 1

    def release(self, user_id: str, session_key: str, turn_id: str) -> None:
        self.in_flight[user_id] -= 1
        if self.in_flight[user_id] <= 0:
            del self.in_flight[user_id]
        turns = self.session_turns[session_key]
        turns[turn_id] -= 1
        if turns[turn_id] <= 0:
            del turns[turn_id]
        if not turns:
            del self.session_turns[session_key]
