from Strongest_Extension import Strongest_Extension


def test_Strongest_Extension_1():
    assert Strongest_Extension('K', ['Ta', 'TAR', 't234An', 'cosSo']) == 'K.TAR'


def test_Strongest_Extension_2():
    assert Strongest_Extension('_', ['Bb', '91245']) == '_.Bb'


def test_Strongest_Extension_3():
    assert Strongest_Extension('Sp', ['671235', 'Bb']) == 'Sp.671235'
