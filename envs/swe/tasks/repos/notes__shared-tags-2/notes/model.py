"""The note model."""

import itertools

_ids = itertools.count(1)


class Note:
    def __init__(self, title, body="", tags=[]):
        self.id = next(_ids)
        self.title = title
        self.body = body
        self.tags = tags

    def add_tag(self, tag):
        tag = tag.strip().lower()
        if tag and tag not in self.tags:
            self.tags.append(tag)

    def __repr__(self):
        return f"Note({self.id}, {self.title!r}, tags={self.tags})"
