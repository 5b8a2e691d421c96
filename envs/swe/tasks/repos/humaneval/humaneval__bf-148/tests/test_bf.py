from bf import bf


def test_bf_1():
    assert bf('Jupiter', 'Neptune') == ('Saturn', 'Uranus'), 'First test error: ' + str(len(bf('Jupiter', 'Neptune')))


def test_bf_2():
    assert bf('Earth', 'Mercury') == ('Venus',), 'Second test error: ' + str(bf('Earth', 'Mercury'))


def test_bf_3():
    assert bf('Mercury', 'Uranus') == ('Venus', 'Earth', 'Mars', 'Jupiter', 'Saturn'), 'Third test error: ' + str(bf('Mercury', 'Uranus'))


def test_bf_4():
    assert bf('Neptune', 'Venus') == ('Earth', 'Mars', 'Jupiter', 'Saturn', 'Uranus'), 'Fourth test error: ' + str(bf('Neptune', 'Venus'))


def test_bf_5():
    assert bf('Earth', 'Earth') == ()


def test_bf_6():
    assert bf('Mars', 'Earth') == ()
