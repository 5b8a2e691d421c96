from check_dict_case import check_dict_case


def test_check_dict_case_1():
    assert check_dict_case({'p': 'pineapple', 'A': 'banana', 'B': 'banana'}) == False, 'Second test error: ' + str(check_dict_case({'p': 'pineapple', 'A': 'banana', 'B': 'banana'}))


def test_check_dict_case_2():
    assert check_dict_case({'p': 'pineapple', 5: 'banana', 'a': 'apple'}) == False, 'Third test error: ' + str(check_dict_case({'p': 'pineapple', 5: 'banana', 'a': 'apple'}))


def test_check_dict_case_3():
    assert check_dict_case({'Name': 'John', 'Age': '36', 'City': 'Houston'}) == False, 'Fourth test error: ' + str(check_dict_case({'Name': 'John', 'Age': '36', 'City': 'Houston'}))


def test_check_dict_case_4():
    assert check_dict_case({}) == False, '1st edge test error: ' + str(check_dict_case({}))
