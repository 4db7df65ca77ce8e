#!/bin/bash
# Entrypoint of the Evoplane images: turn secret files into environment variables, then run
# the command (`evoplane gateway`, `evoplane worker`, `mlflow server`, ...) as PID 1.
#
# Settings are read from EVOPLANE_* variables only (evoplane/settings.py), so a secret
# mounted as a file (Docker secrets, Kubernetes secret volumes) is named by a companion
# variable with a _FILE suffix: EVOPLANE_DATABASE_URL_FILE=/run/secrets/evoplane_database_url
# sets EVOPLANE_DATABASE_URL to the file's content. The same holds for MLFLOW_* variables
# (MLFLOW_BACKEND_STORE_URI_FILE) and the two AWS keys an S3 artifact store needs.
# An empty file sets nothing, so an optional secret (the upstream API key) may stay empty.
set -euo pipefail

for file_var in $(compgen -e); do
    case "$file_var" in
        EVOPLANE_*_FILE | MLFLOW_*_FILE | AWS_ACCESS_KEY_ID_FILE | AWS_SECRET_ACCESS_KEY_FILE) ;;
        *) continue ;;
    esac
    var="${file_var%_FILE}"
    path="${!file_var}"
    if [[ -n "${!var:-}" ]]; then
        echo "evoplane-entrypoint: both $var and $file_var are set; keep one" >&2
        exit 64
    fi
    if [[ ! -r "$path" ]]; then
        echo "evoplane-entrypoint: $file_var names $path, which is missing or unreadable" >&2
        exit 66
    fi
    value="$(<"$path")" # command substitution drops the trailing newline
    unset "$file_var"
    if [[ -n "$value" ]]; then
        export "$var=$value"
    fi
done

exec "$@"
