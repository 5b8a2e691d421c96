from has_close_elements import has_close_elements


def test_has_close_elements_1():
    assert has_close_elements([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05) == False


def test_has_close_elements_2():
    assert has_close_elements([1.0, 2.0, 5.9, 4.0, 5.0], 0.8) == False


def test_has_close_elements_3():
    assert has_close_elements([1.1, 2.2, 3.1, 4.1, 5.1], 0.5) == False
