from intersperse import intersperse


def test_intersperse_1():
    assert intersperse([], 7) == []
