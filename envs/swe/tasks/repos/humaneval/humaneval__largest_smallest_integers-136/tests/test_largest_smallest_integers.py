from largest_smallest_integers import largest_smallest_integers


def test_largest_smallest_integers_1():
    assert largest_smallest_integers([2, 4, 1, 3, 5, 7]) == (None, 1)


def test_largest_smallest_integers_2():
    assert largest_smallest_integers([2, 4, 1, 3, 5, 7, 0]) == (None, 1)


def test_largest_smallest_integers_3():
    assert largest_smallest_integers([1, 3, 2, 4, 5, 6, -2]) == (-2, 1)


def test_largest_smallest_integers_4():
    assert largest_smallest_integers([4, 5, 3, 6, 2, 7, -7]) == (-7, 2)


def test_largest_smallest_integers_5():
    assert largest_smallest_integers([7, 3, 8, 4, 9, 2, 5, -9]) == (-9, 2)


def test_largest_smallest_integers_6():
    assert largest_smallest_integers([]) == (None, None)


def test_largest_smallest_integers_7():
    assert largest_smallest_integers([0]) == (None, None)
