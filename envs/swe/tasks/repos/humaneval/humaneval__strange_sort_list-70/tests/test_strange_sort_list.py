from strange_sort_list import strange_sort_list


def test_strange_sort_list_1():
    assert strange_sort_list([5, 5, 5, 5]) == [5, 5, 5, 5]


def test_strange_sort_list_2():
    assert strange_sort_list([]) == []


def test_strange_sort_list_3():
    assert strange_sort_list([111111]) == [111111]
