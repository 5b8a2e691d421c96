from sum_product import sum_product


def test_sum_product_1():
    assert sum_product([100, 0]) == (100, 0)
