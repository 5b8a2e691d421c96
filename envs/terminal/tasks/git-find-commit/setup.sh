#!/bin/bash
set -e
git init -q -b main
git config user.name "Dev"
git config user.email "dev@example.com"
n=0
c() {  # c "Author Name" "message": commit everything, one day apart
  n=$((n + 1))
  local d="2024-03-$(printf %02d $n)T09:00:00Z"
  git add -A
  GIT_AUTHOR_NAME="$1" GIT_AUTHOR_EMAIL="$(echo "${1%% *}" | tr 'A-Z' 'a-z')@example.com" \
    GIT_AUTHOR_DATE="$d" GIT_COMMITTER_DATE="$d" git commit -q -m "$2"
}
printf 'DEBUG = False\n' > settings.py
c "Ann Lee" "Initial project"
printf 'import logging\n\n# never log API_TOKEN values\nlog = logging.getLogger("app")\n' > logging_setup.py
c "Ben Ortiz" "Add logging"
printf 'import os\n\nDEBUG = False\nAPI_TOKEN = "abc123"\n\n\ndef load():\n    return {"debug": DEBUG}\n' > settings.py
c "Cleo Park" "Add settings loader"
sed -i 's/^DEBUG = False/DEBUG = os.environ.get("DEBUG") == "1"/' settings.py
c "Ann Lee" "Read debug flag from the environment"
sed -i 's/^API_TOKEN = "abc123"/API_TOKEN = "abc123"  # temporary/' settings.py
c "Ben Ortiz" "Mark token as temporary"
sed -i '/^API_TOKEN/d' settings.py
c "Dana Cruz" "Remove hard-coded token"
printf '# App\n' > README.md
c "Ann Lee" "Add README"
