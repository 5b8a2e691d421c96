from starts_one_ends import starts_one_ends


def test_starts_one_ends_1():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert starts_one_ends(3) == 180


def test_starts_one_ends_2():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert starts_one_ends(4) == 1800


def test_starts_one_ends_3():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert starts_one_ends(5) == 18000
