from get_max_triples import get_max_triples


def test_get_max_triples_1():
    assert get_max_triples(5) == 1


def test_get_max_triples_2():
    assert get_max_triples(6) == 4
