from vowels_count import vowels_count


def test_vowels_count_1():
    assert vowels_count('abcde') == 2, 'Test 1'


def test_vowels_count_2():
    assert vowels_count('Alone') == 3, 'Test 2'


def test_vowels_count_3():
    assert vowels_count('bye') == 1, 'Test 4'


def test_vowels_count_4():
    assert vowels_count('bYe') == 1, 'Test 6'
