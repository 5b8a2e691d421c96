from longest import longest


def test_longest_1():
    assert longest(['x', 'y', 'z']) == 'x'


def test_longest_2():
    assert longest(['x', 'yyy', 'zzzz', 'www', 'kkkk', 'abc']) == 'zzzz'
