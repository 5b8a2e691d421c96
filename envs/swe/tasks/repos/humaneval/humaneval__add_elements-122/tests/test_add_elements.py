from add_elements import add_elements


def test_add_elements_1():
    assert add_elements([1, -2, -3, 41, 57, 76, 87, 88, 99], 3) == -4


def test_add_elements_2():
    assert add_elements([11, 21, 3, 90, 5, 6, 7, 8, 9], 4) == 125


def test_add_elements_3():
    assert add_elements([1], 1) == 1, 'This prints if this assert fails 2 (also good for debugging!)'
