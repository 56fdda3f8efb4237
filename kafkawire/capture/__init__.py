"""Decoding Kafka traffic from packet captures, stage by stage (see ``model`` for the values passed on).

The stages are plain Python; the Spark glue lives in its own modules, so importing this package
imports no PySpark.
"""
