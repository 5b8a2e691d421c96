"""Stays are half-open date ranges: [check_in, check_out)."""

from dataclasses import dataclass
from datetime import date


@dataclass(frozen=True)
class Stay:
    check_in: date
    check_out: date

    def __post_init__(self):
        if self.check_out <= self.check_in:
            raise ValueError("check_out must be after check_in")

    @property
    def nights(self):
        return (self.check_out - self.check_in).days
