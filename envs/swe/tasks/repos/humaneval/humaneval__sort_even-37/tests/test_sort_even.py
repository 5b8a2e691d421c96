from sort_even import sort_even


def test_sort_even_1():
    assert tuple(sort_even([1, 2, 3])) == tuple([1, 2, 3])


def test_sort_even_2():
    assert tuple(sort_even([5, 3, -5, 2, -3, 3, 9, 0, 123, 1, -10])) == tuple([-10, 3, -5, 2, -3, 3, 5, 0, 9, 1, 123])
