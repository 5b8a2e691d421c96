from find_max import find_max


def test_find_max_1():
    assert find_max(['play', 'play', 'play']) == 'play', 't10'
