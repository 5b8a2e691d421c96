from incr_list import incr_list


def test_incr_list_1():
    assert incr_list([]) == []
