#!/bin/bash
# Run by the postgres image once, when its data volume is first initialised: the ledger's
# own role and database (ASR_DB_USER, ASR_DB_PASSWORD, ASR_DB_NAME from the environment).
set -euo pipefail
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  --set=role="$ASR_DB_USER" --set=password="$ASR_DB_PASSWORD" --set=db="$ASR_DB_NAME" <<'SQL'
CREATE ROLE :"role" LOGIN PASSWORD :'password';
CREATE DATABASE :"db" OWNER :"role";
SQL
