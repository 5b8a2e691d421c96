from move_one_ball import move_one_ball


def test_move_one_ball_1():
    assert move_one_ball([3, 4, 5, 1, 2]) == True, 'This prints if this assert fails 1 (good for debugging!)'


def test_move_one_ball_2():
    assert move_one_ball([3, 5, 10, 1, 2]) == True


def test_move_one_ball_3():
    assert move_one_ball([4, 3, 1, 2]) == False


def test_move_one_ball_4():
    assert move_one_ball([3, 5, 4, 1, 2]) == False, 'This prints if this assert fails 2 (also good for debugging!)'
