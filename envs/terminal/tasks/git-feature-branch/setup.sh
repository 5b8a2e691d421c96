#!/bin/bash
set -e
git init -q -b main
git config user.name "Dev"
git config user.email "dev@example.com"
c() { GIT_AUTHOR_DATE="2024-01-0$1T10:00:00Z" GIT_COMMITTER_DATE="2024-01-0$1T10:00:00Z" git commit -q -m "$2"; }
printf 'app v1\n' > app.txt && git add app.txt && c 1 "Release 1.0" && git tag v1.0
printf 'app v1.1\n' > app.txt && git add app.txt && c 2 "Start 1.1"
printf 'docs\n' > docs.txt && git add docs.txt && c 3 "Add docs"
