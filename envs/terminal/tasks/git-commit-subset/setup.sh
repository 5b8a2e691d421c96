#!/bin/bash
set -e
git init -q -b main
git config user.name "Dev"
git config user.email "dev@example.com"
mkdir -p src
printf 'def parse(s):\n    raise NotImplementedError\n' > src/parser.py
printf 'todo list\n' > notes.txt
printf '# Demo\n' > README.md
git add -A
GIT_AUTHOR_DATE="2024-01-01T10:00:00Z" GIT_COMMITTER_DATE="2024-01-01T10:00:00Z" git commit -q -m "Initial commit"
printf 'from .tokens import tokenize\n\n\ndef parse(s):\n    return tokenize(s)\n' > src/parser.py
printf 'def tokenize(s):\n    return s.split()\n' > src/tokens.py
printf 'todo list\n- write parser\n' > notes.txt
