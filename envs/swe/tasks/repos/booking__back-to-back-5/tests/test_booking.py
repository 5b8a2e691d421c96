from datetime import date

from booking.availability import is_available, overlaps
from booking.dates import Stay
from booking.pricing import total_price


def stay(a, b):
    return Stay(date(2024, 3, a), date(2024, 3, b))


def test_nights():
    assert stay(1, 4).nights == 3


def test_overlapping_stays_clash():
    assert overlaps(stay(1, 5), stay(4, 8))
    assert not is_available(stay(2, 3), [stay(1, 5)])


def test_price_with_weekend():
    # 2024-03-08 is a Friday: Fri 100, Sat 125, Sun 125
    assert total_price(stay(8, 11), 100) == 350.0
