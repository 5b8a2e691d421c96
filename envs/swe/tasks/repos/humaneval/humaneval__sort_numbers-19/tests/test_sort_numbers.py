from sort_numbers import sort_numbers


def test_sort_numbers_1():
    assert sort_numbers('') == ''


def test_sort_numbers_2():
    assert sort_numbers('three') == 'three'


def test_sort_numbers_3():
    assert sort_numbers('three five nine') == 'three five nine'


def test_sort_numbers_4():
    assert sort_numbers('five zero four seven nine eight') == 'zero four five seven eight nine'
