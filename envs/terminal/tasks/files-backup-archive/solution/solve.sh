#!/bin/bash
set -e
cd /app
tar --exclude='*.log' -czf backup.tar.gz project
