from median import median


def test_median_1():
    assert median([5]) == 5
