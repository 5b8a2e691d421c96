from int_to_mini_roman import int_to_mini_roman


def test_int_to_mini_roman_1():
    assert int_to_mini_roman(19) == 'xix'


def test_int_to_mini_roman_2():
    assert int_to_mini_roman(500) == 'd'


def test_int_to_mini_roman_3():
    assert int_to_mini_roman(4) == 'iv'


def test_int_to_mini_roman_4():
    assert int_to_mini_roman(90) == 'xc'


def test_int_to_mini_roman_5():
    assert int_to_mini_roman(94) == 'xciv'


def test_int_to_mini_roman_6():
    assert int_to_mini_roman(900) == 'cm'


def test_int_to_mini_roman_7():
    assert int_to_mini_roman(994) == 'cmxciv'


def test_int_to_mini_roman_8():
    assert int_to_mini_roman(1000) == 'm'
