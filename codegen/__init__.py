"""kafkawire's code generator: Kafka JSON message specs in, Python codec modules out.

Three steps, each its own module: ``parse`` (JSON with comments into the ``model``), ``validate``
(refuse what upstream's generator refuses), and ``layout`` + ``render`` (Jinja2 templates into source).
"""
