from remove_duplicates import remove_duplicates


def test_remove_duplicates_1():
    assert remove_duplicates([]) == []


def test_remove_duplicates_2():
    assert remove_duplicates([1, 2, 3, 4]) == [1, 2, 3, 4]
