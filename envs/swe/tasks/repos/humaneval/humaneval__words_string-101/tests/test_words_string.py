from words_string import words_string


def test_words_string_1():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert True, 'This prints if this assert fails 2 (also good for debugging!)'
    assert words_string('') == []
