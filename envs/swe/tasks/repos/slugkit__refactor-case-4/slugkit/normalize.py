"""Text normalisation shared by the slug and search-key builders.

Moved here from `slugkit/utils.py` in 2.0; the old `lowercase=True` flag became `keep_case=False`.
"""

import unicodedata


def normalize(text, keep_case=False):
    """Strip accents, collapse whitespace, and lower-case unless `keep_case`."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c))
    text = " ".join(text.split())
    return text if keep_case else text.lower()
