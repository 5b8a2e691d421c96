#!/bin/bash
set -e
cd /app
git rm -q --cached .env
echo ".env" >> .gitignore
git add .gitignore
git commit -q --amend --no-edit
