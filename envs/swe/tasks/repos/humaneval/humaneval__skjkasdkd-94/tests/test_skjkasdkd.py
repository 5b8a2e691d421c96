from skjkasdkd import skjkasdkd


def test_skjkasdkd_1():
    assert skjkasdkd([0, 81, 12, 3, 1, 21]) == 3, 'This prints if this assert fails 5 (also good for debugging!)'
