from unique_digits import unique_digits


def test_unique_digits_1():
    assert unique_digits([152, 323, 1422, 10]) == []
