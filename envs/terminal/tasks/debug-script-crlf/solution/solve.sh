#!/bin/bash
set -e
cd /app
sed -i 's/\r$//' tools/check.sh
chmod +x tools/check.sh
