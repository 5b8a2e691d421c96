"""Profiles: `key.sub = value` lines over the defaults."""

import json

from confkit.defaults import DEFAULTS
from confkit.merge import deep_merge


def parse(text):
    tree = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        key, _, raw = line.partition("=")
        node = tree
        *parents, leaf = key.strip().split(".")
        for p in parents:
            node = node.setdefault(p, {})
        raw = raw.strip()
        try:
            node[leaf] = json.loads(raw)
        except ValueError:
            node[leaf] = raw
    return tree


def load_profile(text):
    return deep_merge(DEFAULTS, parse(text))
