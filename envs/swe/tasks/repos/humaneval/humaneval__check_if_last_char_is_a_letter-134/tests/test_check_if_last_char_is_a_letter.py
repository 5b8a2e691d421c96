from check_if_last_char_is_a_letter import check_if_last_char_is_a_letter


def test_check_if_last_char_is_a_letter_1():
    assert check_if_last_char_is_a_letter('apple pi e') == True


def test_check_if_last_char_is_a_letter_2():
    assert check_if_last_char_is_a_letter('A') == True
