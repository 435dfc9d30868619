# The berth image: `berth serve` (the extender) and `berth operator`, as the chart runs them.
#   docker build -t berth:0.1.0 .          (or: buildah build / podman build, the same arguments)
#   add --build-arg BERTH_COMMIT="$(git rev-parse HEAD)" for `berth version` to name the commit
# Stage 1 installs the dependencies pinned in pyproject.toml into a virtualenv, then builds berth's wheel
# and installs it there; stage 2 copies only that virtualenv onto a clean base and runs as a non-root user.
# BASE: any image with Python 3.11 (`python` or `python3`, with venv) at the same path in both stages;
# CI builds on a Debian bookworm root filesystem it makes itself (e2e/build-image.sh).
ARG BASE=python:3.11-slim

FROM ${BASE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
# The pinned dependencies first, in a layer of their own: a change to berth's code alone reuses it.
# pip's download cache is a build cache mount: kept for the next build, never part of a layer.
COPY pyproject.toml ./
RUN --mount=type=cache,target=/root/.cache/pip \
    "$(command -v python || command -v python3)" -m venv /opt/berth \
    && /opt/berth/bin/python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && /opt/berth/bin/pip install -r /tmp/requirements.txt
COPY README.md ./
COPY berth/ berth/
RUN --mount=type=cache,target=/root/.cache/pip \
    /opt/berth/bin/pip wheel --no-deps --wheel-dir /wheels . \
    && /opt/berth/bin/pip install --no-deps /wheels/berth-*.whl \
    && /opt/berth/bin/pip check \
    && /opt/berth/bin/berth --version

FROM ${BASE}
LABEL org.opencontainers.image.title="berth" \
      org.opencontainers.image.description="Placement policies for Kubernetes: a scheduler extender and an operator" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 65532 berth \
    && useradd --system --uid 65532 --gid berth --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin berth
COPY --from=build /opt/berth /opt/berth
# The commit `berth version` prints ("unknown" when the build did not say).
ARG BERTH_COMMIT=unknown
ENV BERTH_COMMIT=$BERTH_COMMIT \
    PATH=/opt/berth/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
# 8888: berth serve; 9443: the operator's admission webhook; 8080: the operator's liveness endpoint.
EXPOSE 8888 9443 8080
ENTRYPOINT ["berth"]
CMD ["--help"]
