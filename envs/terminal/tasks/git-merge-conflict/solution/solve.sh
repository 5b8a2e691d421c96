#!/bin/bash
set -e
cd /app
git checkout -q main
git merge -q feature > /dev/null 2>&1 || true
printf 'Hello there\nHello, world\n' > greeting.txt
git add greeting.txt
git commit -q --no-edit
