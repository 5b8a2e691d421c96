from is_multiply_prime import is_multiply_prime


def test_is_multiply_prime_1():
    assert is_multiply_prime(5) == False


def test_is_multiply_prime_2():
    assert is_multiply_prime(8) == True


def test_is_multiply_prime_3():
    assert is_multiply_prime(10) == False


def test_is_multiply_prime_4():
    assert is_multiply_prime(3 * 6 * 7) == False


def test_is_multiply_prime_5():
    assert is_multiply_prime(9 * 9 * 9) == False


def test_is_multiply_prime_6():
    assert is_multiply_prime(11 * 9 * 9) == False
