from intersection import intersection


def test_intersection_1():
    assert intersection((1, 2), (2, 3)) == 'NO'


def test_intersection_2():
    assert intersection((-3, -1), (-5, 5)) == 'YES'


def test_intersection_3():
    assert intersection((-2, 2), (-4, 0)) == 'YES'


def test_intersection_4():
    assert intersection((-11, 2), (-1, -1)) == 'NO'


def test_intersection_5():
    assert intersection((1, 2), (3, 5)) == 'NO'


def test_intersection_6():
    assert intersection((-2, -2), (-3, -2)) == 'NO'
