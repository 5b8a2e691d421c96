from fix_spaces import fix_spaces


def test_fix_spaces_1():
    assert fix_spaces('Example') == 'Example', 'This prints if this assert fails 1 (good for debugging!)'


def test_fix_spaces_2():
    assert fix_spaces('Mudasir Hanif ') == 'Mudasir_Hanif_', 'This prints if this assert fails 2 (good for debugging!)'


def test_fix_spaces_3():
    assert fix_spaces('Yellow Yellow  Dirty  Fellow') == 'Yellow_Yellow__Dirty__Fellow', 'This prints if this assert fails 3 (good for debugging!)'
