from make_palindrome import make_palindrome


def test_make_palindrome_1():
    assert make_palindrome('') == ''


def test_make_palindrome_2():
    assert make_palindrome('xyz') == 'xyzyx'


def test_make_palindrome_3():
    assert make_palindrome('jerry') == 'jerryrrej'
