#!/usr/bin/env bash
# One task of the Codex CLI (npm `@openai/codex`, unmodified) against a running stack's /v1/responses.
# usage: deploy/try-codex.sh API_KEY "task" [API_URL] [WORK_DIR]
# Needs `npm install @openai/codex@0.171.0` (its bin on PATH, or CODEX=/path/to/codex); `make harnesses` puts one
# in .harnesses/codex-0.171.0. The task runs in WORK_DIR under Codex's workspace-write sandbox (bubblewrap).
# The config is docs/protocol-openai-responses.md's, as tests/api/test_harness_codex.py runs it.
set -euo pipefail
KEY=${1:?api key}; TASK=${2:?task}; API=${3:-http://127.0.0.1:8000}
TRY=${CODEX_TRY_DIR:-$HOME/.openclaw-rl/codex-try}  # not under /tmp: Codex will not link its sandbox helper there
WORK=${4:-$TRY/work}
CODEX=${CODEX:-$(command -v codex || echo "$(dirname "$0")/../.harnesses/codex-0.171.0/node_modules/.bin/codex")}
mkdir -p "$TRY/home" "$WORK"
export CODEX_HOME="$TRY/home" OPENCLAW_RL_API_KEY="$KEY"
cat > "$CODEX_HOME/config.toml" <<TOML
model = "openclaw-rl-policy"
model_provider = "openclaw-rl"

[model_providers.openclaw-rl]
name = "openclaw-rl"
base_url = "$API/v1"
wire_api = "responses"
env_key = "OPENCLAW_RL_API_KEY"
TOML
exec "$CODEX" exec --json --skip-git-repo-check --sandbox workspace-write -C "$WORK" "$TASK" </dev/null
