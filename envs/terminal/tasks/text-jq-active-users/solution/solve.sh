#!/bin/bash
set -e
cd /app
jq -r '.[] | select(.active) | .email | ascii_downcase' users.json | sort > active_emails.txt
jq '{active: map(select(.active)) | length,
     inactive: map(select(.active | not)) | length,
     admins: [.[] | select(.active and (.roles | index("admin"))) | .name] | sort}' users.json > summary.json
