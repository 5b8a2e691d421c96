"""Credentials shown as a mask wherever settings, URLs or addresses are printed or written down."""

from __future__ import annotations

import re
from typing import Any

MASK = "****"
# The user info is taken to run to the last @: a password may hold an unescaped @, / or ?, which a URL parser would
# split elsewhere and so leak. A URL with an @ in its path or query (none of ours) is only masked more than needed.
_USERINFO = re.compile(r"((?:[A-Za-z][A-Za-z0-9+.-]*:)?//|)(.*)@", re.S)
_SECRET_PARAM = re.compile(r"(?i)(^|&)([^=&]*(?:pass|secret|token|key|auth|credential)[^=&]*)=[^&]*")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S*")


def mask_url(url: str) -> str:
    """`url` as it may be shown or written down: the password in its user info masked (`redis://:****@host:6379/0`;
    a user name alone too, as some services take a token there) and secret-named query parameters (redis-py reads
    `?password=`). Also takes `user:password@host:port` without a scheme, as a Temporal address is written."""
    if m := _USERINFO.match(url):
        user, colon, _ = m[2].partition(":")
        url = f"{m[1]}{user}:{MASK}@{url[m.end() :]}" if colon else f"{m[1]}{MASK}@{url[m.end() :]}"
    base, question, query = url.partition("?")
    if question:
        query, hash_, fragment = query.partition("#")
        query = _SECRET_PARAM.sub(lambda q: f"{q[1]}{q[2]}={MASK}", query) + hash_ + fragment
    return base + question + query


def mask_urls(value: Any) -> Any:
    """`value` (plain dumped data) with the credentials of every URL string in it masked."""
    if isinstance(value, dict):
        return {k: mask_urls(v) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_urls(v) for v in value]
    if isinstance(value, str) and _URL.fullmatch(value):
        return mask_url(value)
    return value
