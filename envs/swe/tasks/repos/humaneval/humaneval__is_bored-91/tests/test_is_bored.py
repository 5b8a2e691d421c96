from is_bored import is_bored


def test_is_bored_1():
    assert is_bored('I love It !') == 1, 'Test 3'
