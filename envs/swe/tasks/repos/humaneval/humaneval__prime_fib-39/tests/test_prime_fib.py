from prime_fib import prime_fib


def test_prime_fib_1():
    assert prime_fib(1) == 2


def test_prime_fib_2():
    assert prime_fib(2) == 3


def test_prime_fib_3():
    assert prime_fib(3) == 5
