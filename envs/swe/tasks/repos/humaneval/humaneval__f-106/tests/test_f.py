from f import f


def test_f_1():
    assert f(1) == [1]
