#!/bin/bash
set -e
git init -q -b main
git config user.name "Dev"
git config user.email "dev@example.com"
c() { GIT_AUTHOR_DATE="2024-06-0$1T10:00:00Z" GIT_COMMITTER_DATE="2024-06-0$1T10:00:00Z" git commit -q -m "$2"; }
printf 'def divide(a, b):\n    return a / b\n' > calc.py && git add -A && c 1 "Add calculator"
git checkout -q -b hotfix
printf 'import logging\nlogging.basicConfig(level=logging.DEBUG)\n' > debug_log.py && git add -A && c 2 "Experimental logging"
printf 'def divide(a, b):\n    if b == 0:\n        return None\n    return a / b\n' > calc.py && git add -A && c 3 "Fix division by zero"
printf 'more logging\n' >> debug_log.py && git add -A && c 4 "More logging"
git checkout -q main
printf '# Calculator\n' > README.md && git add -A && c 5 "Add README"
