#!/bin/bash
set -e
cd /app
sqlite3 app.db <<'SQL'
ALTER TABLE users ADD COLUMN email TEXT;
CREATE TEMP TABLE emails (username TEXT, email TEXT);
.import --csv --skip 1 emails.csv emails
UPDATE users SET email = (SELECT e.email FROM emails e WHERE e.username = users.username);
CREATE INDEX idx_users_email ON users(email);
SQL
