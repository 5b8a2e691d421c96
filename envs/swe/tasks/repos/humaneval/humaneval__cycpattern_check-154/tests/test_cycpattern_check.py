from cycpattern_check import cycpattern_check


def test_cycpattern_check_1():
    assert cycpattern_check('yello', 'ell') == True, 'test #1'


def test_cycpattern_check_2():
    assert cycpattern_check('efef', 'fee') == True, 'test #3'


def test_cycpattern_check_3():
    assert cycpattern_check('winemtt', 'tinem') == True, 'test #5'
