from total_match import total_match


def test_total_match_1():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert total_match([], []) == []


def test_total_match_2():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert total_match(['hi', 'admin'], ['hi', 'hi']) == ['hi', 'hi']


def test_total_match_3():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert total_match(['hi', 'admin'], ['hi', 'hi', 'admin', 'project']) == ['hi', 'admin']


def test_total_match_4():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert total_match(['4'], ['1', '2', '3', '4', '5']) == ['4']


def test_total_match_5():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert total_match(['hi', 'admin'], ['hI', 'Hi']) == ['hI', 'Hi']


def test_total_match_6():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert total_match(['hi', 'admin'], ['hI', 'hi', 'hi']) == ['hI', 'hi', 'hi']


def test_total_match_7():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert True, 'This prints if this assert fails 2 (also good for debugging!)'
    assert total_match([], ['this']) == []


def test_total_match_8():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert True, 'This prints if this assert fails 2 (also good for debugging!)'
    assert total_match(['this'], []) == []
