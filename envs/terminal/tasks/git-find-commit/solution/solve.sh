#!/bin/bash
set -e
cd /app
commit=$(git log --reverse --format=%H -G '^API_TOKEN' -- settings.py | head -n 1)
echo "$commit" > answer.txt
git show -s --format=%an "$commit" > author.txt
