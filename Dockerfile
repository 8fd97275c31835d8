# One image for every lineagewire service (consumers, scheduler); the Spark
# runner adds Java and the spark extra.
FROM python:3.11-slim
WORKDIR /app
COPY . /app
RUN pip install --no-cache-dir ".[consumers,openlineage,scheduler]"
ENTRYPOINT []
