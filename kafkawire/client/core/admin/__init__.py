"""The admin client's requests and answers, sans I/O, a module per family of APIs: ``topics`` (and the
cluster), ``resource_configs`` (DescribeConfigs, AlterConfigs), ``partitions``, ``groups``,
``transactions``, ``acls`` and ``scram``; ``errors`` (what a code becomes, which a retry may cure) and the
client's own settings, ``config``. Users import the public names from ``kafkawire.client.admin``."""
