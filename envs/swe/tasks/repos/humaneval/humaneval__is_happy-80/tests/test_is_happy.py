from is_happy import is_happy


def test_is_happy_1():
    assert is_happy('abcd') == True, 'abcd'


def test_is_happy_2():
    assert is_happy('aabb') == False, 'aabb'


def test_is_happy_3():
    assert is_happy('adb') == True, 'adb'


def test_is_happy_4():
    assert is_happy('xyy') == False, 'xyy'


def test_is_happy_5():
    assert is_happy('iopaxpoi') == True, 'iopaxpoi'


def test_is_happy_6():
    assert is_happy('iopaxioi') == False, 'iopaxioi'
