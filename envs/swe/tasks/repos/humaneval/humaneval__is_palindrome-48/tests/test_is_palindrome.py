from is_palindrome import is_palindrome


def test_is_palindrome_1():
    assert is_palindrome('') == True


def test_is_palindrome_2():
    assert is_palindrome('aaaaa') == True


def test_is_palindrome_3():
    assert is_palindrome('zbcd') == False


def test_is_palindrome_4():
    assert is_palindrome('xywyz') == False


def test_is_palindrome_5():
    assert is_palindrome('xywzx') == False
