#!/bin/bash
set -e
cd /app
sqlite3 store.db <<'SQL'
CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL, stock INTEGER);
.import --csv --skip 1 products.csv products
SQL
