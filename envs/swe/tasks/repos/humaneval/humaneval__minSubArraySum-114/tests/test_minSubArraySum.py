from minSubArraySum import minSubArraySum


def test_minSubArraySum_1():
    assert minSubArraySum([-1, -2, -3]) == -6


def test_minSubArraySum_2():
    assert minSubArraySum([-1, -2, -3, 2, -10]) == -14


def test_minSubArraySum_3():
    assert minSubArraySum([-9999999999999999]) == -9999999999999999


def test_minSubArraySum_4():
    assert minSubArraySum([-1, -2, -3, 10, -5]) == -6


def test_minSubArraySum_5():
    assert minSubArraySum([100, -1, -2, -3, 10, -5]) == -6


def test_minSubArraySum_6():
    assert minSubArraySum([100, -33, 32, -1, 0, -2]) == -33


def test_minSubArraySum_7():
    assert minSubArraySum([-10]) == -10, 'This prints if this assert fails 2 (also good for debugging!)'


def test_minSubArraySum_8():
    assert minSubArraySum([1, -1]) == -1
