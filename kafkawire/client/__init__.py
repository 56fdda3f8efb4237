"""Kafka clients: a sans-IO core (state machines fed responses and time, emitting requests; no sockets,
deterministic to test), an asyncio layer that runs the core over connections, and a blocking facade.

Configuration uses Kafka's property names (snake_case attributes, dotted names via ``from_properties``).
"""
