from all_prefixes import all_prefixes


def test_all_prefixes_1():
    assert all_prefixes('') == []
