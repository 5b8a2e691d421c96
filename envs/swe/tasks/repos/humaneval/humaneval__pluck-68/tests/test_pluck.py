from pluck import pluck


def test_pluck_1():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert pluck([4, 2, 3]) == [2, 1], 'Error'


def test_pluck_2():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert pluck([1, 2, 3]) == [2, 1], 'Error'


def test_pluck_3():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert pluck([]) == [], 'Error'


def test_pluck_4():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert pluck([5, 0, 3, 0, 4, 2]) == [0, 1], 'Error'


def test_pluck_5():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert True, 'This prints if this assert fails 2 (also good for debugging!)'
    assert pluck([1, 2, 3, 0, 5, 3]) == [0, 3], 'Error'


def test_pluck_6():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert True, 'This prints if this assert fails 2 (also good for debugging!)'
    assert pluck([5, 4, 8, 4, 8]) == [4, 1], 'Error'


def test_pluck_7():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert True, 'This prints if this assert fails 2 (also good for debugging!)'
    assert pluck([7, 6, 7, 1]) == [6, 1], 'Error'
