from exchange import exchange


def test_exchange_1():
    assert exchange([1, 2, 3, 4], [1, 5, 3, 4]) == 'NO'


def test_exchange_2():
    assert exchange([5, 7, 3], [2, 6, 3]) == 'NO'


def test_exchange_3():
    assert exchange([3, 2, 6, 1, 8, 9], [3, 5, 5, 1, 1, 1]) == 'NO'
