from multiply import multiply


def test_multiply_1():
    assert multiply(0, 1) == 0, '1st edge test error: ' + str(multiply(0, 1))


def test_multiply_2():
    assert multiply(0, 0) == 0, '2nd edge test error: ' + str(multiply(0, 0))
