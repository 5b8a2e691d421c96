from notes.model import Note
from notes.search import search
from notes.store import NoteStore


def test_create_and_get():
    store = NoteStore()
    note = store.create("Groceries", "milk, eggs")
    assert store.get(note.id) is note
    assert len(store) == 1


def test_tags_are_normalised():
    note = Note("x", tags=["work"])
    note.add_tag("  Urgent ")
    note.add_tag("work")
    assert note.tags == ["work", "urgent"]


def test_search_matches_every_word():
    store = NoteStore()
    store.create("Trip plan", "book the train")
    store.create("Train set", "for the kids")
    assert [n.title for n in search(store, "train book")] == ["Trip plan"]
