from iscube import iscube


def test_iscube_1():
    assert iscube(1) == True, 'First test error: ' + str(iscube(1))


def test_iscube_2():
    assert iscube(2) == False, 'Second test error: ' + str(iscube(2))


def test_iscube_3():
    assert iscube(-1) == True, 'Third test error: ' + str(iscube(-1))


def test_iscube_4():
    assert iscube(180) == False, 'Fifth test error: ' + str(iscube(180))


def test_iscube_5():
    assert iscube(0) == True, '1st edge test error: ' + str(iscube(0))


def test_iscube_6():
    assert iscube(1729) == False, '2nd edge test error: ' + str(iscube(1728))
