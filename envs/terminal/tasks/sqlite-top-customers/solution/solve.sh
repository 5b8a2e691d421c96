#!/bin/bash
set -e
cd /app
sqlite3 shop.db "SELECT c.name FROM customers c JOIN orders o ON o.customer_id = c.id WHERE o.status = 'paid'
                 GROUP BY c.id ORDER BY SUM(o.amount) DESC LIMIT 3;" > top_customers.txt
{
  echo "country,revenue"
  sqlite3 -csv shop.db "SELECT c.country, printf('%.2f', SUM(o.amount)) FROM customers c JOIN orders o
                        ON o.customer_id = c.id WHERE o.status = 'paid' GROUP BY c.country ORDER BY SUM(o.amount) DESC;"
} > revenue_by_country.csv
