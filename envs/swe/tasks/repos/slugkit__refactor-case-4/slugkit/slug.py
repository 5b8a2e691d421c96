"""URL slugs: `slugify("Héllo, World!") == "hello-world"`."""

import re

from slugkit.normalize import normalize

_NOT_WORD = re.compile(r"[^A-Za-z0-9]+")


def slugify(text, separator="-", max_length=None):
    text = normalize(text, True)
    slug = _NOT_WORD.sub(separator, text).strip(separator)
    if max_length is not None:
        slug = slug[:max_length].rstrip(separator)
    return slug
