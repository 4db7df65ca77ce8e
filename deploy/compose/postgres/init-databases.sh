#!/bin/bash
# Databases and roles of an Evoplane installation, one role per job (least privilege):
#
#   evoplane_owner  owns database evoplane; only `evoplane db upgrade` (the migrate job) uses it
#   evoplane_app    gateway, control API, workers: read and write rows, never change the schema
#   temporal        owns temporal and temporal_visibility (Temporal's schema tool and server)
#   mlflow          owns mlflow (the MLflow server migrates its own tables at start)
#
# The postgres image runs this once, on an empty data directory (docker-entrypoint-initdb.d).
# Passwords come from Docker secrets, never from this file. On a PostgreSQL you run yourself,
# run the same statements as a superuser.
set -euo pipefail

secret() {
    local value
    value="$(tr -d '\r\n' <"/run/secrets/$1")"
    if [[ -z "$value" ]]; then
        echo "init-databases: the secret $1 is empty" >&2
        return 1
    fi
    printf '%s' "$value"
}
# Assignments, so that a missing or empty secret stops the script (set -e).
owner_pw="$(secret evoplane_owner_db_password)"
app_pw="$(secret evoplane_app_db_password)"
temporal_pw="$(secret temporal_db_password)"
mlflow_pw="$(secret mlflow_db_password)"

psql --set=ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
    --set=owner_pw="$owner_pw" --set=app_pw="$app_pw" \
    --set=temporal_pw="$temporal_pw" --set=mlflow_pw="$mlflow_pw" <<'SQL'
CREATE ROLE evoplane_owner LOGIN PASSWORD :'owner_pw';
CREATE ROLE evoplane_app LOGIN PASSWORD :'app_pw';
CREATE ROLE temporal LOGIN PASSWORD :'temporal_pw';
CREATE ROLE mlflow LOGIN PASSWORD :'mlflow_pw';

CREATE DATABASE evoplane OWNER evoplane_owner;
CREATE DATABASE temporal OWNER temporal;
CREATE DATABASE temporal_visibility OWNER temporal;
CREATE DATABASE mlflow OWNER mlflow;

-- Nobody but a database's owner may connect to it, except as granted here.
REVOKE ALL ON DATABASE evoplane, temporal, temporal_visibility, mlflow FROM PUBLIC;
-- TEMPORARY: the gateway's capture writer COPYs batches into temporary staging tables.
GRANT CONNECT, TEMPORARY ON DATABASE evoplane TO evoplane_app;

\connect evoplane
REVOKE ALL ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO evoplane_app;
-- Tables the migrations create (as evoplane_owner) are readable and writable by the app;
-- the registry's triggers still refuse UPDATE/DELETE of immutable records, whoever asks.
ALTER DEFAULT PRIVILEGES FOR ROLE evoplane_owner IN SCHEMA public
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO evoplane_app;
ALTER DEFAULT PRIVILEGES FOR ROLE evoplane_owner IN SCHEMA public
    GRANT USAGE, SELECT ON SEQUENCES TO evoplane_app;
SQL
