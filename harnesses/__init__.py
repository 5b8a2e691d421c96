"""Adapters that let outside agent harnesses, unmodified, drive client-driven episodes (api.episodes)."""
