from rolling_max import rolling_max


def test_rolling_max_1():
    assert rolling_max([]) == []
