from compare_one import compare_one


def test_compare_one_1():
    assert compare_one(1, 2) == 2


def test_compare_one_2():
    assert compare_one(1, 2.5) == 2.5


def test_compare_one_3():
    assert compare_one(2, 3) == 3


def test_compare_one_4():
    assert compare_one(5, 6) == 6


def test_compare_one_5():
    assert compare_one(1, '2,3') == '2,3'


def test_compare_one_6():
    assert compare_one('5,1', '6') == '6'


def test_compare_one_7():
    assert compare_one('1', '2') == '2'
