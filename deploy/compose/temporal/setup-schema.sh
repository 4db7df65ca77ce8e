#!/bin/sh
# Brings Temporal's two databases (created by postgres/init-databases.sh, owned by role
# `temporal`) to the schema of this admin-tools version. Run by the temporal-schema job of
# deploy/compose.yaml before every start of the server; safe to run again.
set -eu

SQL_PASSWORD="$(cat /run/secrets/temporal_db_password)"
export SQL_PASSWORD
schema=/etc/temporal/schema/postgresql/v12

for store in temporal:temporal temporal_visibility:visibility; do
    db="${store%%:*}"
    dir="${store##*:}"
    temporal-sql-tool --plugin postgres12 --ep postgres --port 5432 --user temporal --db "$db" \
        setup-schema --version 0.0
    temporal-sql-tool --plugin postgres12 --ep postgres --port 5432 --user temporal --db "$db" \
        update-schema --schema-dir "$schema/$dir/versioned"
done
echo "temporal-schema: temporal and temporal_visibility are up to date"
