#!/bin/bash
set -e
cd /app
git checkout -q -b feature/login v1.0
printf 'login page\n' > login.txt
git add login.txt
git commit -q -m "Add login page"
