from digitSum import digitSum


def test_digitSum_1():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert digitSum('abAB') == 131, 'Error'


def test_digitSum_2():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert digitSum('abcCd') == 67, 'Error'


def test_digitSum_3():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert digitSum('helloE') == 69, 'Error'


def test_digitSum_4():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert digitSum('woArBld') == 131, 'Error'


def test_digitSum_5():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert digitSum('aAaaaXa') == 153, 'Error'


def test_digitSum_6():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert True, 'This prints if this assert fails 2 (also good for debugging!)'
    assert digitSum(' How are yOu?') == 151, 'Error'


def test_digitSum_7():
    assert True, 'This prints if this assert fails 1 (good for debugging!)'
    assert True, 'This prints if this assert fails 2 (also good for debugging!)'
    assert digitSum('You arE Very Smart') == 327, 'Error'
