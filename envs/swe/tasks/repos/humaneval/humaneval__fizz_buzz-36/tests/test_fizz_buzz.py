from fizz_buzz import fizz_buzz


def test_fizz_buzz_1():
    assert fizz_buzz(50) == 0


def test_fizz_buzz_2():
    assert fizz_buzz(100) == 3


def test_fizz_buzz_3():
    assert fizz_buzz(200) == 6


def test_fizz_buzz_4():
    assert fizz_buzz(4000) == 192


def test_fizz_buzz_5():
    assert fizz_buzz(10000) == 639


def test_fizz_buzz_6():
    assert fizz_buzz(100000) == 8026
