from any_int import any_int


def test_any_int_1():
    assert any_int(2.5, 2, 3) == False, 'This prints if this assert fails 2 (good for debugging!)'


def test_any_int_2():
    assert any_int(1.5, 5, 3.5) == False, 'This prints if this assert fails 3 (good for debugging!)'


def test_any_int_3():
    assert any_int(2, 6, 2) == False, 'This prints if this assert fails 4 (good for debugging!)'


def test_any_int_4():
    assert any_int(2.2, 2.2, 2.2) == False, 'This prints if this assert fails 6 (good for debugging!)'


def test_any_int_5():
    assert any_int(3.0, 4, 7) == False, 'This prints if this assert fails 10 (also good for debugging!)'
