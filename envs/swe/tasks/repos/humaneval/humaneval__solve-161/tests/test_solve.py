from solve import solve


def test_solve_1():
    assert solve('AsDf') == 'aSdF'


def test_solve_2():
    assert solve('ab') == 'AB'


def test_solve_3():
    assert solve('#a@C') == '#A@c'


def test_solve_4():
    assert solve('#AsdfW^45') == '#aSDFw^45'


def test_solve_5():
    assert solve('#$a^D') == '#$A^d'


def test_solve_6():
    assert solve('#ccc') == '#CCC'
