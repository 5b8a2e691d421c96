from select_words import select_words


def test_select_words_1():
    assert select_words('', 4) == [], '1st edge test error: ' + str(select_words('', 4))
