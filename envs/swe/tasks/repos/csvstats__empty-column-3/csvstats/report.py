"""A one-column summary: count, mean, median, standard deviation."""

from csvstats.reader import column, read_rows
from csvstats.stats import mean, median, stdev


def summarize(rows, name):
    values = column(rows, name)
    return {"count": len(values), "mean": mean(values), "median": median(values), "stdev": stdev(values)}


def summarize_text(text, name):
    return summarize(read_rows(text), name)
