from how_many_times import how_many_times


def test_how_many_times_1():
    assert how_many_times('', 'x') == 0


def test_how_many_times_2():
    assert how_many_times('john doe', 'john') == 1
