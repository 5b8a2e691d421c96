from common import common


def test_common_1():
    assert common([4, 3, 2, 8], []) == []
