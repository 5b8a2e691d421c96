from sum_squares import sum_squares


def test_sum_squares_1():
    assert sum_squares([]) == 0


def test_sum_squares_2():
    assert sum_squares([1, 1, 1, 1, 1, 1, 1, 1, 1]) == 9


def test_sum_squares_3():
    assert sum_squares([0]) == 0


def test_sum_squares_4():
    assert sum_squares([-1, 0, 0, 0, 0, 0, 0, 0, -1]) == 0
