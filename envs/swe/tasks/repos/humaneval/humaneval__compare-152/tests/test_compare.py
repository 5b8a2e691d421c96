from compare import compare


def test_compare_1():
    assert compare([0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]) == [0, 0, 0, 0, 0, 0], 'This prints if this assert fails 1 (good for debugging!)'
