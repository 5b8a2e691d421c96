from even_odd_count import even_odd_count


def test_even_odd_count_1():
    assert even_odd_count(-78) == (1, 1)


def test_even_odd_count_2():
    assert even_odd_count(3452) == (2, 2)


def test_even_odd_count_3():
    assert even_odd_count(346211) == (3, 3)


def test_even_odd_count_4():
    assert even_odd_count(-345821) == (3, 3)
