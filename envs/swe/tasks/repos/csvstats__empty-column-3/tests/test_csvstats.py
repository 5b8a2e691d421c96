from csvstats.reader import column, read_rows
from csvstats.report import summarize_text
from csvstats.stats import median

DATA = "item,price\npen,1.50\nbook,12\nlamp,\nmug,4.50\n"


def test_blank_cells_are_skipped():
    assert column(read_rows(DATA), "price") == [1.5, 12.0, 4.5]


def test_summary():
    s = summarize_text(DATA, "price")
    assert s["count"] == 3 and s["mean"] == 6.0 and s["median"] == 4.5


def test_median_even():
    assert median([4, 1, 3, 2]) == 2.5
