from modp import modp


def test_modp_1():
    assert modp(0, 101) == 1
