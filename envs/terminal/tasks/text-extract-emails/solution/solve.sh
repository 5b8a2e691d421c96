#!/bin/bash
set -e
cd /app
grep -ohE '[A-Za-z0-9._+-]+@([A-Za-z0-9-]+\.)+[A-Za-z]+' messages/*.txt | tr 'A-Z' 'a-z' | sort -u > emails.txt
