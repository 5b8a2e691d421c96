#!/bin/bash
set -e
cd /app
tr 'A-Z' 'a-z' < book.txt | tr -cs 'a-z' '\n' | grep -v '^$' | sort | uniq -c | sort -k1,1nr -k2,2 | head -n 5 \
  | awk '{ print $1, $2 }' > top_words.txt
