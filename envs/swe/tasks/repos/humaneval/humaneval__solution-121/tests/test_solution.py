from solution import solution


def test_solution_1():
    assert solution([2, 4, 8]) == 0
