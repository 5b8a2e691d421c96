"""Built-in defaults of every profile."""

DEFAULTS = {
    "server": {"host": "127.0.0.1", "port": 8000},
    "logging": {"level": "info", "handlers": ["console"]},
    "features": {"beta": False},
}
