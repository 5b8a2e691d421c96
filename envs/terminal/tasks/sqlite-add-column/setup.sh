#!/bin/bash
set -e
sqlite3 app.db <<'SQL'
CREATE TABLE users (id INTEGER PRIMARY KEY, username TEXT UNIQUE NOT NULL, created TEXT NOT NULL);
INSERT INTO users (username, created) VALUES
  ('alice', '2024-01-02'), ('bob', '2024-01-05'), ('carol', '2024-02-11'), ('dave', '2024-03-01');
SQL
