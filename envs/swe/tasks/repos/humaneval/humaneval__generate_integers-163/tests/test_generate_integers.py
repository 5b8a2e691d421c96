from generate_integers import generate_integers


def test_generate_integers_1():
    assert generate_integers(17, 89) == [], 'Test 4'
