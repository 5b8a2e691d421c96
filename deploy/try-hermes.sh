#!/usr/bin/env bash
# One task of Hermes (PyPI `hermes-agent`, unmodified) against a running stack's /v1/responses.
# usage: deploy/try-hermes.sh API_KEY "task" [API_URL] [WORK_DIR]
# Needs `pip install hermes-agent==0.19.0` in a venv of its own (it pins openai, pydantic, fastapi... exactly):
# `hermes` on PATH, or HERMES=/path/to/hermes; `make harnesses` puts one in .harnesses/hermes-0.19.0.
# One-shot mode (-z) bypasses approvals: the task runs in WORK_DIR with the user's rights.
# The config is docs/protocol-openai-responses.md's, as tests/api/test_harness_hermes.py runs it.
set -euo pipefail
KEY=${1:?api key}; TASK=${2:?task}; API=${3:-http://127.0.0.1:8000}
TRY=${HERMES_TRY_DIR:-$HOME/.openclaw-rl/hermes-try}
WORK=${4:-$TRY/work}
HERMES=${HERMES:-$(command -v hermes || echo "$(dirname "$0")/../.harnesses/hermes-0.19.0/bin/hermes")}
mkdir -p "$TRY/home" "$WORK"
export HERMES_HOME="$TRY/home"
cat > "$HERMES_HOME/config.yaml" <<YAML
model:
  provider: openclaw-rl
  default: openclaw-rl-policy
custom_providers:
  - name: openclaw-rl
    base_url: $API/v1
    api_key: $KEY
    api_mode: codex_responses
    model: openclaw-rl-policy
YAML
cd "$WORK"
exec "$HERMES" -z "$TASK" </dev/null
