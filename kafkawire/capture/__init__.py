"""Decoding Kafka traffic from packet captures, stage by stage, in plain Python (see ``model`` for the
values passed on and the modules of each stage).

Nothing here imports PySpark: the Spark runner is ``kafkawire.capture_spark``, which uses these stages.
"""
