from search import search


def test_search_1():
    assert search([3, 3]) == -1


def test_search_2():
    assert search([8, 8, 8, 8, 8, 8, 8, 8]) == 8


def test_search_3():
    assert search([1]) == 1


def test_search_4():
    assert search([10]) == -1
