from count_nums import count_nums


def test_count_nums_1():
    assert count_nums([]) == 0


def test_count_nums_2():
    assert count_nums([-1, -2, 0]) == 0


def test_count_nums_3():
    assert count_nums([12, 23, 34, -45, -56, 0]) == 5
