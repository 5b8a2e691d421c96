from words_in_sentence import words_in_sentence


def test_words_in_sentence_1():
    assert words_in_sentence('here') == ''


def test_words_in_sentence_2():
    assert words_in_sentence('here is') == 'is'
