"""Notes with tags and search."""
