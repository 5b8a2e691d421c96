#!/bin/bash
set -e
cat > /app/rotate.sh <<'SH'
#!/bin/bash
set -euo pipefail
if [ $# -ne 2 ] || ! [[ "$2" =~ ^[0-9]+$ ]]; then
  echo "usage: rotate.sh DIR N" >&2
  exit 1
fi
dir=$1
keep=$2
find "$dir" -maxdepth 1 -type f -name '*.bak' -printf '%T@\t%p\0' \
  | sort -z -t $'\t' -k1,1nr \
  | tail -z -n +"$((keep + 1))" \
  | cut -z -f2- \
  | xargs -0 -r rm -f --
SH
chmod +x /app/rotate.sh
