"""An in-memory collection of notes."""

from notes.model import Note


class NoteStore:
    def __init__(self):
        self._notes = {}

    def create(self, title, body="", tags=None):
        note = Note(title, body) if tags is None else Note(title, body, tags)
        self._notes[note.id] = note
        return note

    def get(self, note_id):
        return self._notes[note_id]

    def tagged(self, tag):
        tag = tag.strip().lower()
        return [n for n in self._notes.values() if tag in n.tags]

    def all(self):
        return list(self._notes.values())

    def __len__(self):
        return len(self._notes)
