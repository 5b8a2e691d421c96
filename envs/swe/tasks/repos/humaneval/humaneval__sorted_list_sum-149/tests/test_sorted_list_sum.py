from sorted_list_sum import sorted_list_sum


def test_sorted_list_sum_1():
    assert sorted_list_sum(['d', 'b', 'c', 'a']) == []


def test_sorted_list_sum_2():
    assert sorted_list_sum(['a', 'b', 'b', 'c', 'c', 'a']) == []
