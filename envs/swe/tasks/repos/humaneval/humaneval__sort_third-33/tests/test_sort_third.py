from sort_third import sort_third


def test_sort_third_1():
    assert tuple(sort_third([1, 2, 3])) == tuple(sort_third([1, 2, 3]))
