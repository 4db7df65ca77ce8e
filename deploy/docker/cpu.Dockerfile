# syntax=docker/dockerfile:1.7
# The Evoplane CPU image: gateway, control API, CPU workers, the migration job, the Temporal
# setup job and (in deploy/compose.yaml) the MLflow server, whose client version it shares.
#
# Build from the repository root (the context must be the root; the file-specific
# cpu.Dockerfile.dockerignore beside this file keeps .venv, .git and data out of it):
#
#   docker build -f deploy/docker/cpu.Dockerfile -t evoplane-cpu:0.1.0 .
#
# torch is the CPU build: constraints/cpu.txt pins its version and the PyTorch CPU index
# supplies the +cpu wheel, so no CUDA wheel is ever pulled (as `make install` does locally).

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG EXTRAS=dspy,train
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
RUN python -m venv /opt/evoplane \
 && /opt/evoplane/bin/pip install --upgrade pip setuptools wheel
WORKDIR /src
# Dependencies change less often than code, but pip needs the packages to resolve the
# project itself; one layer keeps the install step simple and reproducible.
COPY pyproject.toml README.md ./
COPY constraints/ constraints/
COPY atdp/ atdp/
COPY registry/ registry/
COPY runtime/ runtime/
COPY proxy/ proxy/
COPY evolution/ evolution/
COPY activities/ activities/
COPY workflows/ workflows/
COPY evoplane/ evoplane/
RUN /opt/evoplane/bin/pip install \
        --constraint constraints/cpu.txt \
        --extra-index-url "${TORCH_INDEX_URL}" \
        ".[${EXTRAS}]" \
 && /opt/evoplane/bin/evoplane --help > /dev/null

FROM ${PYTHON_IMAGE}
# Evoplane never needs root. uid/gid 10001: outside the range of distribution users, and the
# number the Kubernetes manifests set in runAsUser.
RUN groupadd --system --gid 10001 evoplane \
 && useradd --system --uid 10001 --gid evoplane --home-dir /var/lib/evoplane \
        --shell /usr/sbin/nologin evoplane \
 && mkdir -p /var/lib/evoplane/spool /var/lib/evoplane/mlartifacts \
 && chown -R evoplane:evoplane /var/lib/evoplane
COPY --from=build /opt/evoplane /opt/evoplane
COPY --chmod=0755 deploy/docker/entrypoint.sh /usr/local/bin/evoplane-entrypoint
COPY --chmod=0755 deploy/docker/temporal_setup.py /usr/local/bin/evoplane-temporal-setup
ENV PATH=/opt/evoplane/bin:${PATH} \
    HOME=/var/lib/evoplane \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    EVOPLANE_DATA_DIR=/var/lib/evoplane \
    EVOPLANE_HOST=0.0.0.0 \
    LITELLM_LOCAL_MODEL_COST_MAP=True \
    MLFLOW_DISABLE_TELEMETRY=true \
    DO_NOT_TRACK=true
USER 10001:10001
WORKDIR /var/lib/evoplane
EXPOSE 8400 8401 5000
# Every Evoplane process stops cleanly on SIGINT: uvicorn drains the gateway (its capture
# writer flushes the spool) and the worker leaves its task queues. A plain `evoplane worker`
# installs no SIGTERM handler and, as PID 1, would ignore SIGTERM until killed.
STOPSIGNAL SIGINT
ENTRYPOINT ["evoplane-entrypoint"]
CMD ["evoplane", "--help"]
