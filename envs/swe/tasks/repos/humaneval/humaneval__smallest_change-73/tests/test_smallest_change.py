from smallest_change import smallest_change


def test_smallest_change_1():
    assert smallest_change([1, 2, 3, 4, 3, 2, 2]) == 1


def test_smallest_change_2():
    assert smallest_change([1, 4, 2]) == 1


def test_smallest_change_3():
    assert smallest_change([1, 2, 3, 2, 1]) == 0


def test_smallest_change_4():
    assert smallest_change([3, 1, 1, 3]) == 0


def test_smallest_change_5():
    assert smallest_change([1]) == 0
