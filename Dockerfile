# meshbot's container image: the `meshbot` command as the entrypoint, run by a non-root user (uid 10001)
# in /project, where the project is mounted or copied. One build target per PySpark extra, chosen by where
# Spark runs (see "Install" in docs/operations.md):
#   spark    (the default, last stage) meshbot[spark] with Java 17 (headless JRE): local Spark, cluster
#            masters and Spark Connect
#   connect  meshbot[connect] alone, no Java: a small image for gateways that are all Spark Connect
#            (`remote: sc://...`)
#
#   docker build --target connect -t meshbot:connect .
#   docker run --rm -v "$PWD/my_project:/project" meshbot:connect --gateway ci plan --explain
#
# The builder stage builds meshbot's wheel from this checkout. Each target installs its extra's locked
# dependencies (requirements/<extra>.txt, each checked against its hash, as the action installs them),
# then that wheel with --no-deps (never a meshbot of an index, nor an editable install), into
# /opt/meshbot, a virtualenv owned by root, so the user that runs meshbot cannot change it. The Debian
# release is pinned to bookworm: it packages OpenJDK 17, and trixie (the plain `python:3.11-slim` since
# 2025) does not.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY bot/ bot/
COPY templates/ templates/
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /dist .

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="meshbot" \
      org.opencontainers.image.description="SQLMesh-compatible transformations on Apache Spark" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/meshbot \
    PATH=/opt/meshbot/bin:$PATH
RUN python -m venv /opt/meshbot \
    && groupadd --gid 10001 meshbot \
    && useradd --uid 10001 --gid 10001 --create-home --home-dir /home/meshbot \
               --shell /usr/sbin/nologin meshbot \
    && install -d -o 10001 -g 10001 /project
WORKDIR /project
ENTRYPOINT ["meshbot"]
CMD ["--help"]

FROM runtime AS connect
RUN --mount=type=bind,source=requirements,target=/requirements \
    --mount=type=bind,from=builder,source=/dist,target=/dist \
    pip install --no-cache-dir --require-hashes --requirement /requirements/connect.txt \
    && pip install --no-cache-dir --no-deps /dist/meshbot-*.whl
USER 10001:10001

FROM runtime AS spark
# /usr/share/man/man1: the slim images leave it out, and the JRE's update-alternatives links a page there
RUN --mount=type=bind,source=requirements,target=/requirements \
    --mount=type=bind,from=builder,source=/dist,target=/dist \
    mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/* \
    && pip install --no-cache-dir --require-hashes --requirement /requirements/spark.txt \
    && pip install --no-cache-dir --no-deps /dist/meshbot-*.whl
USER 10001:10001
