#!/bin/bash
set -e
git init -q -b main
git config user.name "Dev"
git config user.email "dev@example.com"
c() { GIT_AUTHOR_DATE="2024-02-0$1T10:00:00Z" GIT_COMMITTER_DATE="2024-02-0$1T10:00:00Z" git commit -q -am "$2"; }
printf 'name: shop\ntimeout: 30\n' > config.yaml && git add config.yaml && c 1 "Initial config"
printf 'name: shop\ntimeout: 30\ncache:\n  size: 512\n' > config.yaml && c 2 "Add cache settings"
printf 'name: shop\ntimeout: -1\ncache:\n  size: 512\n' > config.yaml && c 3 "Change timeout setting"
printf '# Shop\n' > README.md && git add README.md && c 4 "Add README"
