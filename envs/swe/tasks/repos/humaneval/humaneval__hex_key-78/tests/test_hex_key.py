from hex_key import hex_key


def test_hex_key_1():
    assert hex_key('1077E') == 2, 'Second test error: ' + str(hex_key('1077E'))


def test_hex_key_2():
    assert hex_key('2020') == 2, 'Fourth test error: ' + str(hex_key('2020'))


def test_hex_key_3():
    assert hex_key('123456789ABCDEF0') == 6, 'Fifth test error: ' + str(hex_key('123456789ABCDEF0'))


def test_hex_key_4():
    assert hex_key('112233445566778899AABBCCDDEEFF00') == 12, 'Sixth test error: ' + str(hex_key('112233445566778899AABBCCDDEEFF00'))


def test_hex_key_5():
    assert hex_key([]) == 0
