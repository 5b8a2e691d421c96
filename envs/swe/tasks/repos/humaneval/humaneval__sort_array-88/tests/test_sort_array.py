from sort_array import sort_array


def test_sort_array_1():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert sort_array([]) == [], 'Error'


def test_sort_array_2():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert sort_array([5]) == [5], 'Error'
