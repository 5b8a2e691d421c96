#!/bin/bash
set -e
cd /app
sqlite3 contacts.db <<'SQL'
DELETE FROM contacts WHERE id NOT IN (SELECT MIN(id) FROM contacts GROUP BY lower(email));
CREATE UNIQUE INDEX idx_contacts_email ON contacts(lower(email));
SQL
