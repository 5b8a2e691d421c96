from change_base import change_base


def test_change_base_1():
    assert change_base(8, 3) == '22'


def test_change_base_2():
    for x in range(2, 8):
        assert change_base(x, x + 1) == str(x)
