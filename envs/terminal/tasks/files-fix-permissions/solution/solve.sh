#!/bin/bash
set -e
cd /app
chmod 755 bin/*.sh
chmod 600 secrets/api.key
chmod 700 secrets
find public -type d -exec chmod 755 {} +
find public -type f -exec chmod 644 {} +
