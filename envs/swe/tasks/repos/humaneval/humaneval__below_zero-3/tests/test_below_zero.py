from below_zero import below_zero


def test_below_zero_1():
    assert below_zero([]) == False


def test_below_zero_2():
    assert below_zero([1, 2, -3, 1, 2, -3]) == False


def test_below_zero_3():
    assert below_zero([1, -1, 2, -2, 5, -5, 4, -4]) == False
