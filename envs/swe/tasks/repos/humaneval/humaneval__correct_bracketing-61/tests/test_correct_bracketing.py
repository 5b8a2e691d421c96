from correct_bracketing import correct_bracketing


def test_correct_bracketing_1():
    assert not correct_bracketing('((()())))')


def test_correct_bracketing_2():
    assert not correct_bracketing(')(()')


def test_correct_bracketing_3():
    assert not correct_bracketing('(')


def test_correct_bracketing_4():
    assert not correct_bracketing('((((')


def test_correct_bracketing_5():
    assert not correct_bracketing(')')


def test_correct_bracketing_6():
    assert not correct_bracketing('(()')


def test_correct_bracketing_7():
    assert not correct_bracketing('()()(()())())(()')


def test_correct_bracketing_8():
    assert not correct_bracketing('()()(()())()))()')
