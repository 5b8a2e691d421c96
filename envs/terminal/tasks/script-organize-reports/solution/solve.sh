#!/bin/bash
set -e
cat > /app/organize.sh <<'SH'
#!/bin/bash
set -euo pipefail
dir=$1
for f in "$dir"/report_*.txt; do
  [ -f "$f" ] || continue
  name=$(basename "$f")
  if [[ "$name" =~ ^report_([0-9]{4})-([0-9]{2})-[0-9]{2}\.txt$ ]]; then
    dest="$dir/${BASH_REMATCH[1]}/${BASH_REMATCH[2]}"
    mkdir -p "$dest"
    mv "$f" "$dest/"
  fi
done
SH
chmod +x /app/organize.sh
bash /app/organize.sh /app/reports
