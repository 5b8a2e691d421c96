from filter_by_substring import filter_by_substring


def test_filter_by_substring_1():
    assert filter_by_substring([], 'john') == []
