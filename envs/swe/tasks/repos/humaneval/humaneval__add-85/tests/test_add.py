from add import add


def test_add_1():
    assert add([4, 0, 6, 7]) == 0
