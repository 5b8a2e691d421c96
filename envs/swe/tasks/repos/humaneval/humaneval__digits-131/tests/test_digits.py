from digits import digits


def test_digits_1():
    assert digits(2468) == 0
