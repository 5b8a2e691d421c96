"""Full-text search over a store."""


def search(store, words):
    words = [w.lower() for w in words.split()]
    hits = []
    for note in store.all():
        text = f"{note.title} {note.body}".lower()
        if all(w in text for w in words):
            hits.append(note)
    return hits
