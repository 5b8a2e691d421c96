"""Per-user cap on chat requests in flight (HTTP 429 beyond it)."""

from __future__ import annotations

from collections import Counter

from api.errors import ApiError


class Admission:
    def __init__(self, max_per_user: int):
        self.max_per_user = max_per_user
        self.in_flight: Counter[str] = Counter()

    def acquire(self, user_id: str) -> None:
        if self.in_flight[user_id] >= self.max_per_user:
            raise ApiError(
                429,
                f"{self.max_per_user} requests of user {user_id} are already in flight (api.max_inflight_per_user); "
                "retry when one finishes",
                code="too_many_requests",
            )
        self.in_flight[user_id] += 1

    def release(self, user_id: str) -> None:
        self.in_flight[user_id] -= 1
        if self.in_flight[user_id] <= 0:
            del self.in_flight[user_id]
