from get_closest_vowel import get_closest_vowel


def test_get_closest_vowel_1():
    assert get_closest_vowel('easy') == ''


def test_get_closest_vowel_2():
    assert get_closest_vowel('eAsy') == ''


def test_get_closest_vowel_3():
    assert get_closest_vowel('ali') == ''


def test_get_closest_vowel_4():
    assert get_closest_vowel('ab') == ''


def test_get_closest_vowel_5():
    assert get_closest_vowel('ba') == ''


def test_get_closest_vowel_6():
    assert get_closest_vowel('quick') == ''


def test_get_closest_vowel_7():
    assert get_closest_vowel('Asia') == ''
