from triples_sum_to_zero import triples_sum_to_zero


def test_triples_sum_to_zero_1():
    assert triples_sum_to_zero([1, 3, -2, 1]) == True


def test_triples_sum_to_zero_2():
    assert triples_sum_to_zero([2, 4, -5, 3, 9, 7]) == True


def test_triples_sum_to_zero_3():
    assert triples_sum_to_zero([1]) == False
