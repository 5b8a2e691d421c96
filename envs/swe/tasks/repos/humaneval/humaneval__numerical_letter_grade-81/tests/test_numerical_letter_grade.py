from numerical_letter_grade import numerical_letter_grade


def test_numerical_letter_grade_1():
    assert numerical_letter_grade([4.0, 3, 1.7, 2, 3.5]) == ['A+', 'B', 'C-', 'C', 'A-']


def test_numerical_letter_grade_2():
    assert numerical_letter_grade([1.2]) == ['D+']


def test_numerical_letter_grade_3():
    assert numerical_letter_grade([0.5]) == ['D-']


def test_numerical_letter_grade_4():
    assert numerical_letter_grade([0.0]) == ['E']


def test_numerical_letter_grade_5():
    assert numerical_letter_grade([0, 0.7]) == ['E', 'D-']
