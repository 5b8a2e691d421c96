#!/bin/bash
set -e
cd /app
awk '$9 == 404 { print $1 }' access.log | sort | uniq -c | sort -k1,1nr | head -n 3 | awk '{ print $1, $2 }' > top_ips.txt
