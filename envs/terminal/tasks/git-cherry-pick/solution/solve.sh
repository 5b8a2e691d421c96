#!/bin/bash
set -e
cd /app
git checkout -q main
fix=$(git log --format=%H --grep='^Fix division by zero$' hotfix)
git cherry-pick "$fix" > /dev/null
