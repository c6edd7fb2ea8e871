# kpybroker as a container image: a small broker running as a non-root user, its data on
# a volume, configured by KAFKA_* environment variables as the common Kafka images are.
# See docs/container.md.
#
#   docker build -t kpybroker .
#   docker run -p 9092:9092 -e KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092 kpybroker

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# The package and its dependencies (all of them wheels) in a virtual environment; pip and
# the build's caches stay in this stage. The slim image has no C compiler, so setup.py's
# compiled record walks are skipped and the broker walks records in Python (docs/limits.md).
FROM ${PYTHON_IMAGE} AS build
RUN python3 -m venv /opt/kpybroker
COPY pyproject.toml setup.py README.md /src/
COPY kpybroker /src/kpybroker
RUN /opt/kpybroker/bin/pip install --no-cache-dir --disable-pip-version-check /src \
    && /opt/kpybroker/bin/pip uninstall --yes pip

FROM ${PYTHON_IMAGE}
RUN useradd --system --uid 1000 --user-group --no-create-home \
        --home-dir /var/lib/kpybroker kpybroker \
    && mkdir -p /var/lib/kpybroker/data /etc/kpybroker \
    && chown -R kpybroker:kpybroker /var/lib/kpybroker /etc/kpybroker
COPY --from=build /opt/kpybroker /opt/kpybroker
ENV PATH=/opt/kpybroker/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    KAFKA_LOG_DIRS=/var/lib/kpybroker/data
USER kpybroker
WORKDIR /var/lib/kpybroker
VOLUME ["/var/lib/kpybroker/data"]
EXPOSE 9092
HEALTHCHECK --interval=10s --timeout=6s --start-period=30s --retries=3 \
    CMD ["python3", "-m", "kpybroker.tools.container_config", "--check"]
ENTRYPOINT ["python3", "-m", "kpybroker.tools.container_config"]
