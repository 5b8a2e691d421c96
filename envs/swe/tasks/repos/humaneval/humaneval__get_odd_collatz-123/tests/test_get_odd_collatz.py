from get_odd_collatz import get_odd_collatz


def test_get_odd_collatz_1():
    assert get_odd_collatz(5) == [1, 5]
