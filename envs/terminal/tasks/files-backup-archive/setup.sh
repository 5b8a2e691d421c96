#!/bin/bash
set -e
mkdir -p project/src project/docs project/logs project/src/cache
printf 'print("main")\n' > project/src/main.py
printf 'def helper():\n    return 1\n' > project/src/util.py
printf '# Project\n' > project/docs/readme.md
printf 'started\n' > project/logs/app.log
printf 'debug line\n' > project/debug.log
printf 'cached\n' > project/src/cache/result.log
printf 'keep me\n' > project/logs/notes.txt
printf 'catalog\n' > project/changelog.md
