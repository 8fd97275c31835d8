# Two images, one Dockerfile (docs: README "Deploy"):
#   --target service  every consumer service, the scheduler, the OpenLineage receiver, the registry and the UI: all
#                     their extras in one image (one build, one layer cache; the extras share most of their
#                     dependencies)
#   --target spark    the refresh runner, and spark-submit users: Java 17, PySpark and our emitter
# No cargo in either: the compiled Avro reader (native/) is optional and the install goes on without it,
# so events are decoded by fastavro (docs/consumers.md, "Avro decoding").
# tests/deploy/ reads the `pip install` line of each stage and installs it the same way (make test).
FROM python:3.11-slim-bookworm AS base
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN useradd --create-home --uid 10001 lineagewire \
 && mkdir -p /data /archive \
 && chown lineagewire /data /archive
WORKDIR /app
COPY . /app

FROM base AS service
RUN pip install ".[consumers,openlineage,datahub,alerting,audit,s3,registry,postgres,scheduler,ingest]"
USER lineagewire
ENTRYPOINT []

FROM base AS spark
# Spark 4 runs on Java 17 or 21; pyspark's wheel brings Spark itself and spark-submit.
# (the man folder: the JRE's postinst links its man pages there, and slim images have none)
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/* \
 && ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /opt/java
ENV JAVA_HOME=/opt/java
# Which PySpark: the newest 4.x by default; --build-arg PYSPARK="pyspark==3.5.7" for clusters on Spark 3.5
# (Databricks 14.3-16.4 LTS, EMR 7, Dataproc 2.x, Glue 5). README "Deploy".
ARG PYSPARK="pyspark>=4.0,<5"
RUN pip install ".[consumers,spark]" "$PYSPARK"
USER lineagewire
ENTRYPOINT []
