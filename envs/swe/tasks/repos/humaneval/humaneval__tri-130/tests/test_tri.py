from tri import tri


def test_tri_1():
    assert tri(0) == [1]


def test_tri_2():
    assert tri(1) == [1, 3]
