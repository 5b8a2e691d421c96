from largest_prime_factor import largest_prime_factor


def test_largest_prime_factor_1():
    assert largest_prime_factor(27) == 3
