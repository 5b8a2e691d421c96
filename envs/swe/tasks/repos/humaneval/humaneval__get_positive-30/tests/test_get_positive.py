from get_positive import get_positive


def test_get_positive_1():
    assert get_positive([-1, -2, 4, 5, 6]) == [4, 5, 6]


def test_get_positive_2():
    assert get_positive([-1, -2]) == []


def test_get_positive_3():
    assert get_positive([]) == []
