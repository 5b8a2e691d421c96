from count_upper import count_upper


def test_count_upper_1():
    assert count_upper('') == 0
