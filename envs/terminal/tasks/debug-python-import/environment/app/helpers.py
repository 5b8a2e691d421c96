import re

from app.main import SEPARATOR


def slugify(text):
    words = re.findall(r"[a-z0-9]+", text.lower())
    return SEPARATOR.join(words)
