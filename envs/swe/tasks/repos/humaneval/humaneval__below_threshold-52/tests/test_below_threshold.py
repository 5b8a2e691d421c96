from below_threshold import below_threshold


def test_below_threshold_1():
    assert below_threshold([1, 2, 4, 10], 100)


def test_below_threshold_2():
    assert below_threshold([1, 20, 4, 10], 21)


def test_below_threshold_3():
    assert below_threshold([1, 20, 4, 10], 22)


def test_below_threshold_4():
    assert below_threshold([1, 8, 4, 10], 11)
