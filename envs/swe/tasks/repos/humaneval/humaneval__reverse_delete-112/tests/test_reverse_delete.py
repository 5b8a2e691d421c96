from reverse_delete import reverse_delete


def test_reverse_delete_1():
    assert reverse_delete('abcde', 'ae') == ('bcd', False)


def test_reverse_delete_2():
    assert reverse_delete('abcdef', 'b') == ('acdef', False)


def test_reverse_delete_3():
    assert reverse_delete('dwik', 'w') == ('dik', False)


def test_reverse_delete_4():
    assert reverse_delete('a', 'a') == ('', True)


def test_reverse_delete_5():
    assert reverse_delete('mamma', 'mia') == ('', True)
