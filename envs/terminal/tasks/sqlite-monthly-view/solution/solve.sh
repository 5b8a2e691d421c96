#!/bin/bash
set -e
cd /app
sqlite3 sales.db "CREATE VIEW monthly_revenue AS
  SELECT strftime('%Y-%m', created_at) AS month, ROUND(SUM(amount), 2) AS revenue
  FROM orders WHERE status = 'complete' GROUP BY month ORDER BY month;"
