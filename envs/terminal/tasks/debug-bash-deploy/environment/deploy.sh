#!/bin/bash
# Usage: deploy.sh NAME -- copies the site's .html pages into out/NAME/
set -e
cd "$(dirname "$0")"
name=$1
if [ -z $name ]; then
  echo "usage: deploy.sh NAME" >&2
  exit 1
fi
dest=out/$name
mkdir -p $dest
for page in $(ls site/*.html); do
  cp $page $dest/
done
echo "deployed $(ls $dest | wc -l) pages to $dest"
