from can_arrange import can_arrange


def test_can_arrange_1():
    assert can_arrange([]) == -1
