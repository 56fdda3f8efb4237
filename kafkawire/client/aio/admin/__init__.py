"""AsyncAdminClient (``client``), its ``router`` (where each request goes, and its retries) and its calls,
a module per family of APIs (``topics``, ``partitions``, ``groups``, ``transactions``, ``security``) over
``calls`` (what they share). Users import it from ``kafkawire.client.admin``."""
