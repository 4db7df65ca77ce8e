#!/bin/sh
# Writes the Docker secrets of deploy/compose.yaml into deploy/compose/secrets/, once.
# A file that exists is kept: rotating a secret is a deliberate act (deploy/README.md).
#
#   deploy/compose/make-secrets.sh
#   printf '%s' "$OPENAI_API_KEY" > deploy/compose/secrets/evoplane_upstream_api_key   # optional
#
# The directory is 0700 (only you can read it on the host); the files are 0644 because
# Compose bind-mounts file secrets unchanged and each container reads them as its own
# unprivileged user (postgres, temporal, evoplane).
set -eu
umask 077

dir="$(cd "$(dirname "$0")" && pwd)/secrets"
mkdir -p "$dir"
chmod 0700 "$dir"

random_hex() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

write() { # name value: write unless present
    if [ -e "$dir/$1" ]; then
        echo "kept    $1"
    else
        printf '%s\n' "$2" >"$dir/$1"
        chmod 0644 "$dir/$1"
        echo "created $1"
    fi
}

read_secret() { tr -d '\n' <"$dir/$1"; }

write postgres_password "$(random_hex)"
write evoplane_owner_db_password "$(random_hex)"
write evoplane_app_db_password "$(random_hex)"
write temporal_db_password "$(random_hex)"
write mlflow_db_password "$(random_hex)"

# Connection URLs are derived from the passwords above (hex: nothing to URL-encode).
write evoplane_migrate_database_url \
    "postgresql+psycopg://evoplane_owner:$(read_secret evoplane_owner_db_password)@postgres:5432/evoplane"
write evoplane_database_url \
    "postgresql+psycopg://evoplane_app:$(read_secret evoplane_app_db_password)@postgres:5432/evoplane"
write mlflow_backend_store_uri \
    "postgresql+psycopg://mlflow:$(read_secret mlflow_db_password)@postgres:5432/mlflow"

# Bearer token of the control API (`evoplane api`), as `evoplane up` would make one.
write evoplane_admin_token "evpadm_$(random_hex)"
# Fernet key for sealed raw copies of redacted events: 32 random bytes, URL-safe base64
# (the format `evoplane key seal-key` prints).
write evoplane_seal_key "$(head -c 32 /dev/urandom | base64 | tr '+/' '-_')"
# Bearer key for an OpenAI-compatible upstream that needs one; empty means none.
if [ ! -e "$dir/evoplane_upstream_api_key" ]; then
    : >"$dir/evoplane_upstream_api_key"
    chmod 0644 "$dir/evoplane_upstream_api_key"
    echo "created evoplane_upstream_api_key (empty)"
fi
