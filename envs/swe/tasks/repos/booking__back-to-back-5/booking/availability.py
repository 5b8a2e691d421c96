"""Which stays clash with each other."""


def overlaps(a, b):
    """True when two stays share at least one night."""
    return a.check_in <= b.check_out and b.check_in <= a.check_out


def conflicts(stay, booked):
    return [b for b in booked if overlaps(stay, b)]


def is_available(stay, booked):
    return not conflicts(stay, booked)
