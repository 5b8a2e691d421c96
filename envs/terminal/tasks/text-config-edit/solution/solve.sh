#!/bin/bash
set -e
cd /app
sed -i \
  -e '/^\[server\]/,/^\[/ s/^port = .*/port = 8080/' \
  -e '/^\[database\]/,/^\[/ s/^debug = .*/debug = false/' \
  -e 's/^# log_level = info$/log_level = warning/' \
  config.ini
