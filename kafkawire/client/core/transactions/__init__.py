"""The transactional producer, sans I/O (KIP-98, KIP-447, KIP-890): the ``manager`` with its ``state``,
what each error code means (``errors``) and the request bodies (``requests``)."""
