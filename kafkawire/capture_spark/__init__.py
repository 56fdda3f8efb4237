"""The capture decoder (``kafkawire.capture``) run on Spark: the job's plan, its two stages and the Parquet
part files they write, the session and its JVM set-up, the workers' daemon and memory tuning, the Spark
report engine, the Spark types of the typed bodies (``message_types``), and the ``decode``/``report``
commands with their spark-submit entry (``submit``).

It depends on the decoder; the decoder never imports it, nor PySpark.
"""
