from monotonic import monotonic


def test_monotonic_1():
    assert monotonic([1, 2, 4, 10]) == True


def test_monotonic_2():
    assert monotonic([1, 2, 4, 20]) == True


def test_monotonic_3():
    assert monotonic([1, 20, 4, 10]) == False


def test_monotonic_4():
    assert monotonic([1, 2, 3, 2, 5, 60]) == False


def test_monotonic_5():
    assert monotonic([1, 2, 3, 4, 5, 60]) == True


def test_monotonic_6():
    assert monotonic([9, 9, 9, 9]) == True
