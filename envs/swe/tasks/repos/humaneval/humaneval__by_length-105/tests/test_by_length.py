from by_length import by_length


def test_by_length_1():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert by_length([]) == [], 'Error'


def test_by_length_2():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert by_length([1, -1, 55]) == ['One'], 'Error'
