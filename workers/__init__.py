"""Worker processes: one per typed pool, each polling its own task queue."""
