from specialFilter import specialFilter


def test_specialFilter_1():
    assert specialFilter([5, -2, 1, -5]) == 0


def test_specialFilter_2():
    assert specialFilter([1]) == 0


def test_specialFilter_3():
    assert specialFilter([]) == 0
