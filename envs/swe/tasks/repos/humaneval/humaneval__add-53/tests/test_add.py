from add import add


def test_add_1():
    import random
    assert add(1, 0) == 1
