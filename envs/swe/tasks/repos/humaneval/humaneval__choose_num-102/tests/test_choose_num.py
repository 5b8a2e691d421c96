from choose_num import choose_num


def test_choose_num_1():
    assert choose_num(12, 15) == 14


def test_choose_num_2():
    assert choose_num(33, 12354) == 12354


def test_choose_num_3():
    assert choose_num(6, 29) == 28


def test_choose_num_4():
    assert choose_num(7, 7) == -1


def test_choose_num_5():
    assert choose_num(546, 546) == 546
