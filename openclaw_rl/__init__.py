"""OpenClaw-RL on Temporal: shared core (settings, logging, clients, CLI)."""
