"""The broker's request handlers, one family of APIs a module, each a class of coroutines that take a
decoded request and its version and return the response (or None: no response, as for acks=0).

``Handlers`` (``broker.handlers``) builds them over the broker's shared state (``BrokerState``) and
maps each API key to its coroutine.
"""
