"""Read a CSV file into rows of typed values (blank cells become None)."""

import csv
import io


def parse_number(cell):
    cell = cell.strip()
    if not cell:
        return None
    return float(cell.replace(",", ""))


def read_rows(text):
    reader = csv.DictReader(io.StringIO(text))
    return [dict(row) for row in reader]


def column(rows, name):
    """The numbers of one column, blanks left out."""
    values = (parse_number(row.get(name) or "") for row in rows)
    return [v for v in values if v is not None]
