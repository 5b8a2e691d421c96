from even_odd_palindrome import even_odd_palindrome


def test_even_odd_palindrome_1():
    assert even_odd_palindrome(1) == (0, 1), 'This prints if this assert fails 2 (also good for debugging!)'
