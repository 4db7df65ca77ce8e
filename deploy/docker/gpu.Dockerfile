# syntax=docker/dockerfile:1.7
# The Evoplane GPU worker image: `evoplane worker --gpu` serves evoplane-gpu (training,
# heavy evaluation) and evoplane-control. Python 3.12 because megatron-core needs it.
#
#   docker build -f deploy/docker/gpu.Dockerfile -t evoplane-gpu:0.1.0 .
#
# No constraints file: sglang pins its own CUDA torch. dspy is in the default extras because a
# --gpu worker also serves evoplane-control, whose harness operator runs DSPy.
# The CUDA *devel* base keeps nvcc and the headers that Triton and megatron-core compile
# kernels with at run time; the torch wheels bring their own CUDA libraries.

ARG CUDA_IMAGE=nvidia/cuda:12.8.1-devel-ubuntu24.04

FROM ${CUDA_IMAGE}
ARG EXTRAS=dspy,train,gpu
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
        python3.12 python3.12-venv python3.12-dev build-essential ca-certificates libnuma1 \
 && rm -rf /var/lib/apt/lists/*
RUN python3.12 -m venv /opt/evoplane \
 && /opt/evoplane/bin/pip install --upgrade pip setuptools wheel
WORKDIR /src
COPY pyproject.toml README.md ./
COPY atdp/ atdp/
COPY registry/ registry/
COPY runtime/ runtime/
COPY proxy/ proxy/
COPY evolution/ evolution/
COPY activities/ activities/
COPY workflows/ workflows/
COPY evoplane/ evoplane/
RUN /opt/evoplane/bin/pip install ".[${EXTRAS}]" \
 && /opt/evoplane/bin/evoplane --help > /dev/null \
 && rm -rf /src

RUN groupadd --system --gid 10001 evoplane \
 && useradd --system --uid 10001 --gid evoplane --home-dir /var/lib/evoplane \
        --shell /usr/sbin/nologin evoplane \
 && mkdir -p /var/lib/evoplane/checkpoints \
 && chown -R evoplane:evoplane /var/lib/evoplane
COPY --chmod=0755 deploy/docker/entrypoint.sh /usr/local/bin/evoplane-entrypoint
ENV PATH=/opt/evoplane/bin:${PATH} \
    HOME=/var/lib/evoplane \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    EVOPLANE_DATA_DIR=/var/lib/evoplane \
    LITELLM_LOCAL_MODEL_COST_MAP=True \
    MLFLOW_DISABLE_TELEMETRY=true \
    DO_NOT_TRACK=true
USER 10001:10001
WORKDIR /var/lib/evoplane
STOPSIGNAL SIGINT
ENTRYPOINT ["evoplane-entrypoint"]
CMD ["evoplane", "worker", "--gpu"]
