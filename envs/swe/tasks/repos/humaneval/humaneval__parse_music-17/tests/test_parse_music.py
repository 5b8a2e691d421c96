from parse_music import parse_music


def test_parse_music_1():
    assert parse_music('') == []


def test_parse_music_2():
    assert parse_music('.| .| .| .|') == [1, 1, 1, 1]
