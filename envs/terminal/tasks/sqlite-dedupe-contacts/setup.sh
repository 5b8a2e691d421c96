#!/bin/bash
set -e
sqlite3 contacts.db <<'SQL'
CREATE TABLE contacts (id INTEGER PRIMARY KEY, name TEXT, email TEXT NOT NULL);
INSERT INTO contacts VALUES
  (1, 'Ann', 'ann@example.com'),
  (2, 'Bo', 'bo@example.com'),
  (3, 'Ann B.', 'Ann@Example.com'),
  (4, 'Cy', 'cy@example.com'),
  (5, 'Bo', 'bo@example.com'),
  (6, 'Di', 'di@example.com'),
  (7, 'ANN', 'ANN@EXAMPLE.COM'),
  (8, 'Cy2', 'CY@example.com');
SQL
