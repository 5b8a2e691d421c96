from eat import eat


def test_eat_1():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert eat(2, 11, 5) == [7, 0], 'Error'


def test_eat_2():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert True, 'This prints if this assert fails 2 (also good for debugging!)'
    assert eat(4, 5, 1) == [5, 0], 'Error'
