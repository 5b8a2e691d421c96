"""Deep merge of nested dictionaries."""


def deep_merge(base, override):
    """`base` updated with `override`, recursively; neither argument is changed."""
    result = base
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = deep_merge(result[key], value)
        else:
            result[key] = value
    return result
