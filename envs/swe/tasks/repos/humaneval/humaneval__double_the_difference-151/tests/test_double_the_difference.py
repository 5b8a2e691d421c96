from double_the_difference import double_the_difference


def test_double_the_difference_1():
    assert double_the_difference([]) == 0, 'This prints if this assert fails 1 (good for debugging!)'


def test_double_the_difference_2():
    assert double_the_difference([0.1, 0.2, 0.3]) == 0, 'This prints if this assert fails 3 (good for debugging!)'


def test_double_the_difference_3():
    assert double_the_difference([-10, -20, -30]) == 0, 'This prints if this assert fails 4 (good for debugging!)'


def test_double_the_difference_4():
    assert double_the_difference([0.2, 3, 5]) == 34, 'This prints if this assert fails 6 (also good for debugging!)'
