#!/bin/bash
# Harbor's verifier convention: run as `bash /tests/test.sh` in /app after the agent is done; the reward (0..1)
# goes to /logs/verifier/reward.txt. No `set -e`: every check runs, and a reward is written whatever happens.
set -u
manifest=/app/data.sha256
expected=/tests/expected.sha256 # hard-coded: the agent could change the files in /app/data
passed=0

check() { # check NAME COMMAND...: run one check, count it when it succeeds
    local name=$1
    shift
    if "$@"; then
        echo "PASSED $name"
        passed=$((passed + 1))
    else
        echo "FAILED $name"
    fi
}

well_formed() { [ -s "$manifest" ] && ! grep -qvE '^[0-9a-f]{64}  [^/].*$' "$manifest"; }
same_paths() { [ -f "$manifest" ] && [ "$(cut -c67- "$manifest" | LC_ALL=C sort)" = "$(cut -c67- "$expected")" ]; }
right_hashes() { [ -s "$manifest" ] && [ -z "$(grep -vxF -f "$expected" "$manifest")" ]; }
exact() { cmp -s "$manifest" "$expected"; }

check "every line is '<sha256>  <relative path>'" well_formed
check "lists every file under /app/data, and only those" same_paths
check "every hash is the file's" right_hashes
check "sorted by path in byte order" exact

mkdir -p /logs/verifier
awk -v p="$passed" 'BEGIN { printf "%g\n", p / 4 }' > /logs/verifier/reward.txt
echo "reward: $(cat /logs/verifier/reward.txt) ($passed of 4 checks)"
