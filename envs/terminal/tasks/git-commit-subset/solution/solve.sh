#!/bin/bash
set -e
cd /app
git add src
git commit -q -m "Add parser"
