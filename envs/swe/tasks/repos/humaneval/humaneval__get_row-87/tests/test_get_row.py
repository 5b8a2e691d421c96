from get_row import get_row


def test_get_row_1():
    assert get_row([[1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6]], 2) == [(0, 1), (1, 1), (2, 1), (3, 1), (4, 1), (5, 1)]


def test_get_row_2():
    assert get_row([], 1) == []


def test_get_row_3():
    assert get_row([[1]], 2) == []


def test_get_row_4():
    assert get_row([[], [1], [1, 2, 3]], 3) == [(2, 2)]
