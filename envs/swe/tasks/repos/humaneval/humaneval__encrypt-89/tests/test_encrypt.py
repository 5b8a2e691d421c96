from encrypt import encrypt


def test_encrypt_1():
    assert encrypt('hi') == 'lm', 'This prints if this assert fails 1 (good for debugging!)'


def test_encrypt_2():
    assert encrypt('asdfghjkl') == 'ewhjklnop', 'This prints if this assert fails 1 (good for debugging!)'


def test_encrypt_3():
    assert encrypt('gf') == 'kj', 'This prints if this assert fails 1 (good for debugging!)'


def test_encrypt_4():
    assert encrypt('et') == 'ix', 'This prints if this assert fails 1 (good for debugging!)'


def test_encrypt_5():
    assert encrypt('a') == 'e', 'This prints if this assert fails 2 (also good for debugging!)'
