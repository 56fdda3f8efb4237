"""The transaction coordinator (KIP-98, KIP-447, KIP-890): transactional ids' state (``metadata``) and its
durable log (``state_log``), producer ids (``producer_ids``), the markers that end a transaction in every
partition it wrote to (``markers``), and the coordinator over them (``coordinator``).

Nothing is imported here: a broker that sees no transaction loads none of it."""
