# The berth image: `berth serve` (the extender) and `berth operator`, as the chart runs them.
#   docker build -t berth:0.1.0 .
# Stage 1 builds berth's wheel and installs it, with the dependencies pinned in pyproject.toml, into a
# virtualenv; stage 2 copies only that virtualenv onto a clean python:3.11-slim and runs as a non-root user.

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
COPY pyproject.toml README.md ./
COPY berth/ berth/
RUN python -m pip wheel --no-deps --wheel-dir /wheels . \
    && python -m venv /opt/berth \
    && /opt/berth/bin/pip install /wheels/berth-*.whl \
    && /opt/berth/bin/berth --version

FROM python:3.11-slim
LABEL org.opencontainers.image.title="berth" \
      org.opencontainers.image.description="Placement policies for Kubernetes: a scheduler extender and an operator" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 65532 berth \
    && useradd --system --uid 65532 --gid berth --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin berth
COPY --from=build /opt/berth /opt/berth
ENV PATH=/opt/berth/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
# 8888: berth serve; 9443: the operator's admission webhook; 8080: the operator's liveness endpoint.
EXPOSE 8888 9443 8080
ENTRYPOINT ["berth"]
CMD ["--help"]
