"""The REST API (FastAPI): health now; the OpenAI-compatible chat endpoint builds on it."""
