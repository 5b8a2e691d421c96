from fib4 import fib4


def test_fib4_1():
    assert fib4(5) == 4
