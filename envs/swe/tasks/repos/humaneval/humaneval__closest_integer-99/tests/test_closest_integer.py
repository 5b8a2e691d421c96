from closest_integer import closest_integer


def test_closest_integer_1():
    assert closest_integer('14.5') == 15, 'Test 2'


def test_closest_integer_2():
    assert closest_integer('-15.5') == -16, 'Test 3'


def test_closest_integer_3():
    assert closest_integer('15.3') == 15, 'Test 3'
