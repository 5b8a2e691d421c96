from derivative import derivative


def test_derivative_1():
    assert derivative([1]) == []
