#!/bin/bash
set -e
git init -q -b main
git config user.name "Dev"
git config user.email "dev@example.com"
c() { GIT_AUTHOR_DATE="2024-04-0$1T10:00:00Z" GIT_COMMITTER_DATE="2024-04-0$1T10:00:00Z" git commit -q -m "$2"; }
printf 'Hello\n' > greeting.txt && printf 'v1\n' > version.txt && git add -A && c 1 "Initial"
git checkout -q -b feature
printf 'Hello, world\n' > greeting.txt && printf 'feature\n' > feature.txt && git add -A && c 2 "Feature greeting"
git checkout -q main
printf 'Hello there\n' > greeting.txt && printf 'v2\n' > version.txt && git add -A && c 3 "Main greeting"
