from is_equal_to_sum_even import is_equal_to_sum_even


def test_is_equal_to_sum_even_1():
    assert is_equal_to_sum_even(4) == False


def test_is_equal_to_sum_even_2():
    assert is_equal_to_sum_even(6) == False
