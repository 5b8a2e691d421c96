#!/bin/bash
set -e
sqlite3 shop.db <<'SQL'
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers(id), amount REAL, status TEXT);
INSERT INTO customers VALUES
  (1, 'Ada', 'UK'), (2, 'Bruno', 'BR'), (3, 'Chen', 'CN'), (4, 'Dara', 'UK'),
  (5, 'Emil', 'DE'), (6, 'Fatima', 'DE'), (7, 'Goro', 'JP');
INSERT INTO orders (customer_id, amount, status) VALUES
  (1, 120.00, 'paid'), (1, 80.50, 'paid'), (1, 500.00, 'refunded'),
  (2, 300.00, 'paid'), (2, 45.25, 'paid'),
  (3, 999.99, 'refunded'), (3, 150.00, 'paid'),
  (4, 260.00, 'paid'), (4, 10.00, 'pending'),
  (5, 75.00, 'paid'), (5, 75.00, 'paid'), (5, 75.00, 'paid'),
  (6, 410.10, 'paid'),
  (7, 5.00, 'paid');
SQL
