from order_by_points import order_by_points


def test_order_by_points_1():
    assert order_by_points([]) == []


def test_order_by_points_2():
    assert order_by_points([1, -11, -32, 43, 54, -98, 2, -3]) == [-3, -32, -98, -11, 1, 2, 43, 54]
