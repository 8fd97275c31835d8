"""Real cluster managers on this machine for the cluster tests (tests/producers/spark/test_clusters.py).

- ``yarn``: Hadoop's MiniYARNCluster (a ResourceManager and one NodeManager) in a JVM of its own, as Spark's
  own YarnClusterSuite runs it; its jars come from Maven Central into ``$LINEAGEWIRE_HOME/hadoop-<version>``.
- ``standalone``: a Spark standalone master and one worker from the pip PySpark.
- ``pyenv``: what a job ships to YARN: a venv-pack'd environment with lineagewire, and the PySpark and py4j
  archives a Spark distribution has in ``python/lib`` (the pip PySpark has not).
- ``process``: a server started as a child process, waited for by what it prints, stopped at the end.

Every server binds to 127.0.0.1.
"""
