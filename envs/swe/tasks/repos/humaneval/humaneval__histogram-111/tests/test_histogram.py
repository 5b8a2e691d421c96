from histogram import histogram


def test_histogram_1():
    assert histogram('a b b a') == {'a': 2, 'b': 2}, 'This prints if this assert fails 1 (good for debugging!)'


def test_histogram_2():
    assert histogram('a b c a b') == {'a': 2, 'b': 2}, 'This prints if this assert fails 2 (good for debugging!)'


def test_histogram_3():
    assert histogram('a b c d g') == {'a': 1, 'b': 1, 'c': 1, 'd': 1, 'g': 1}, 'This prints if this assert fails 3 (good for debugging!)'


def test_histogram_4():
    assert histogram('r t g') == {'r': 1, 't': 1, 'g': 1}, 'This prints if this assert fails 4 (good for debugging!)'


def test_histogram_5():
    assert histogram('r t g') == {'r': 1, 't': 1, 'g': 1}, 'This prints if this assert fails 6 (good for debugging!)'


def test_histogram_6():
    assert histogram('a') == {'a': 1}, 'This prints if this assert fails 8 (also good for debugging!)'
