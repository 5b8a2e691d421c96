from slugkit.keys import display_key, search_key
from slugkit.normalize import normalize
from slugkit.slug import slugify


def test_normalize_strips_accents():
    assert normalize("  Crème   Brûlée ") == "creme brulee"


def test_keys():
    assert display_key("Crème Brûlée") == "Creme Brulee"
    assert search_key("Crème Brûlée") == "creme brulee"


def test_slug_separator_and_length():
    assert slugify("a b c d", separator="_", max_length=5) == "a_b_c"
