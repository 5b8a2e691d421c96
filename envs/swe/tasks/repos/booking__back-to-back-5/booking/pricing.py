"""Prices: a nightly rate, weekends dearer."""

from datetime import timedelta

WEEKEND_FACTOR = 1.25


def total_price(stay, rate):
    total = 0.0
    day = stay.check_in
    while day < stay.check_out:
        total += rate * (WEEKEND_FACTOR if day.weekday() >= 5 else 1.0)
        day += timedelta(days=1)
    return round(total, 2)
