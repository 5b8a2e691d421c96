#!/bin/bash
set -e
cd /app
jq -s '.[0] * .[1]' config/base.json config/prod.json > merged.json
