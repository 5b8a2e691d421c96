from next_smallest import next_smallest


def test_next_smallest_1():
    assert next_smallest([1, 2, 3, 4, 5]) == 2


def test_next_smallest_2():
    assert next_smallest([5, 1, 4, 3, 2]) == 2


def test_next_smallest_3():
    assert next_smallest([]) == None


def test_next_smallest_4():
    assert next_smallest([1, 1]) == None


def test_next_smallest_5():
    assert next_smallest([1, 0 ** 0]) == None


def test_next_smallest_6():
    assert next_smallest([-35, 34, 12, -45]) == -35
