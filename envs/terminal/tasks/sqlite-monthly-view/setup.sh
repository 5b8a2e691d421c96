#!/bin/bash
set -e
sqlite3 sales.db <<'SQL'
CREATE TABLE orders (id INTEGER PRIMARY KEY, created_at TEXT NOT NULL, amount REAL NOT NULL, status TEXT NOT NULL);
INSERT INTO orders (created_at, amount, status) VALUES
  ('2024-01-03 09:15:00', 100.10, 'complete'),
  ('2024-01-20 17:40:00', 49.95, 'complete'),
  ('2024-01-31 23:59:59', 10.00, 'cancelled'),
  ('2024-02-01 00:00:01', 200.00, 'complete'),
  ('2024-02-14 12:00:00', 0.34, 'complete'),
  ('2024-03-09 08:00:00', 75.00, 'cancelled'),
  ('2024-04-02 10:30:00', 12.50, 'complete'),
  ('2024-04-28 19:05:00', 12.25, 'complete');
SQL
