#!/bin/bash
set -e
git init -q -b main
git config user.name "Dev"
git config user.email "dev@example.com"
c() { GIT_AUTHOR_DATE="2024-05-0$1T10:00:00Z" GIT_COMMITTER_DATE="2024-05-0$1T10:00:00Z" git commit -q -m "$2"; }
printf 'print("app")\n' > app.py && git add -A && c 1 "Initial"
printf 'SETTINGS = {"env": "prod"}\n' > config.py
printf 'SECRET_KEY=s3cr3t-value\n' > .env
git add -A && c 2 "Add config"
