from fibfib import fibfib


def test_fibfib_1():
    assert fibfib(2) == 1


def test_fibfib_2():
    assert fibfib(1) == 0
