from simplify import simplify


def test_simplify_1():
    assert simplify('1/6', '2/1') == False, 'test2'


def test_simplify_2():
    assert simplify('7/10', '10/2') == False, 'test4'


def test_simplify_3():
    assert simplify('2/3', '5/2') == False, 'test8'


def test_simplify_4():
    assert simplify('5/2', '3/5') == False, 'test9'


def test_simplify_5():
    assert simplify('1/5', '1/5') == False, 'test13'
