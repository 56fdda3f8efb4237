"""A fuzzing kit for Kafka code: your codec, your broker, your proxy (``pip install 'kafkawire[fuzz]'``).

- ``kafkawire.testing.strategies`` (Hypothesis): ``messages(cls, version)`` for any generated message
  class and version (valid values, unknown tagged fields, boundary lengths and counts), ``requests`` and
  ``responses`` by API, ``any_message()``, ``record_batches()`` of every magic and codec (control batches
  included) and ``mutated(bytes)``.
- ``kafkawire.testing.values``: the same generator over a plain ``random.Random`` (no Hypothesis).
- ``kafkawire.testing.mutations``: byte-level mutators (``mutate(data, rng)``).
- ``kafkawire.testing.fuzz``: ``kafkawire fuzz --bootstrap HOST:PORT``, which sends a running broker
  generated requests of every API and version it advertises, and malformed frames, and checks its answers.
- ``kafkawire.testing.pytest_plugin`` (loaded by pytest through the ``pytest11`` entry point): fixtures
  ``kafka_broker`` and ``kafka_cluster``, brokers in the test process with faults on command.

Testing your own codec against kafkawire's::

    from hypothesis import given
    from kafkawire.testing.strategies import messages

    @given(messages("MetadataResponse", 12))
    def test_my_decoder_reads_what_kafkawire_writes(response):
        mine = my_codec.decode_metadata_response(response.encode(12), version=12)
        assert mine.topics == [t.name for t in response.topics]
"""
from __future__ import annotations

__all__ = ["strategies", "values", "mutations", "fuzz"]
