from fib import fib


def test_fib_1():
    assert fib(1) == 1
