from split_words import split_words


def test_split_words_1():
    assert split_words('Hello world!') == ['Hello', 'world!']


def test_split_words_2():
    assert split_words('Hello world,!') == ['Hello', 'world,!']


def test_split_words_3():
    assert split_words('Hello,Hello,world !') == ['Hello,Hello,world', '!']
