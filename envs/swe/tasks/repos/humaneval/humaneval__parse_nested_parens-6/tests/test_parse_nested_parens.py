from parse_nested_parens import parse_nested_parens


def test_parse_nested_parens_1():
    assert parse_nested_parens('(()()) ((())) () ((())()())') == [2, 3, 1, 3]


def test_parse_nested_parens_2():
    assert parse_nested_parens('() (()) ((())) (((())))') == [1, 2, 3, 4]
