from special_factorial import special_factorial


def test_special_factorial_1():
    assert special_factorial(1) == 1, 'Test 1'
