from factorize import factorize


def test_factorize_1():
    assert factorize(3 * 19) == [3, 19]


def test_factorize_2():
    assert factorize(3 * 19 * 3 * 19) == [3, 3, 19, 19]


def test_factorize_3():
    assert factorize(3 * 19 * 3 * 19 * 3 * 19) == [3, 3, 3, 19, 19, 19]


def test_factorize_4():
    assert factorize(3 * 19 * 19 * 19) == [3, 19, 19, 19]


def test_factorize_5():
    assert factorize(3 * 2 * 3) == [2, 3, 3]
