from pairs_sum_to_zero import pairs_sum_to_zero


def test_pairs_sum_to_zero_1():
    assert pairs_sum_to_zero([1, 3, -2, 1]) == False


def test_pairs_sum_to_zero_2():
    assert pairs_sum_to_zero([1, 2, 3, 7]) == False


def test_pairs_sum_to_zero_3():
    assert pairs_sum_to_zero([2, 4, -5, 3, 5, 7]) == True


def test_pairs_sum_to_zero_4():
    assert pairs_sum_to_zero([1]) == False


def test_pairs_sum_to_zero_5():
    assert pairs_sum_to_zero([-3, 9, -1, 3, 2, 30]) == True


def test_pairs_sum_to_zero_6():
    assert pairs_sum_to_zero([-3, 9, -1, 3, 2, 31]) == True


def test_pairs_sum_to_zero_7():
    assert pairs_sum_to_zero([-3, 9, -1, 4, 2, 30]) == False


def test_pairs_sum_to_zero_8():
    assert pairs_sum_to_zero([-3, 9, -1, 4, 2, 31]) == False
