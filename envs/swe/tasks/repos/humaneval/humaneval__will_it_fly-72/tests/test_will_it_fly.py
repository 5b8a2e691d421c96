from will_it_fly import will_it_fly


def test_will_it_fly_1():
    assert will_it_fly([3], 5) is True


def test_will_it_fly_2():
    assert will_it_fly([3, 2, 3], 1) is False


def test_will_it_fly_3():
    assert will_it_fly([1, 2, 3], 6) is False


def test_will_it_fly_4():
    assert will_it_fly([5], 5) is True
