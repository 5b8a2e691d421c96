#!/bin/bash
set -e
cd /app
latest=$(ls releases | sort -V | tail -n 1)
ln -sfn "releases/$latest" current
echo "$latest" > current_version.txt
