from sum_squares import sum_squares


def test_sum_squares_1():
    assert sum_squares([0]) == 0, 'This prints if this assert fails 2 (also good for debugging!)'
