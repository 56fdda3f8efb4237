"""The broker's settings, by Kafka's names:

- ``broker_config``: ``BrokerConfig``, from keyword arguments or Kafka's property names;
- ``properties``: Java ``.properties`` files, as ``kafka-server-start.sh`` reads them;
- ``kafka_properties``: the property names Kafka 4.3 defines (to refuse the others);
- ``topic_configs``: topic configs and the broker's dynamic log configs, with their synonyms;
- ``loggers``: BROKER_LOGGER config resources (KIP-412), the broker's loggers and their levels.
"""
