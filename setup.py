"""Build configuration beyond pyproject.toml: the optional C accelerators (see pyproject.toml)."""
from setuptools import Extension, setup

# optional=True: without a C compiler the build warns and installs the pure-Python code, which the
# accelerators only stand in for.
setup(ext_modules=[
    # The native decoder of the generated codecs (kafkawire/codec/native.py).
    Extension("kafkawire.codec._decoder", ["kafkawire/codec/_decoder.c"],
              depends=["kafkawire/codec/_programs.h"], optional=True),
    # The native encoder of the generated codecs (kafkawire/codec/native.py).
    Extension("kafkawire.codec._encoder", ["kafkawire/codec/_encoder.c"],
              depends=["kafkawire/codec/_programs.h"], optional=True),
    # RecordBatch.rows' per-record loop (kafkawire/records/batch.py).
    Extension("kafkawire.records._rows", ["kafkawire/records/_rows.c"], optional=True),
    # RecordAppender.append, a producer's per-record write (kafkawire/records/appender.py).
    Extension("kafkawire.records._append", ["kafkawire/records/_append.c"], optional=True),
    # Kafka's key hash for the producer's partitioner (kafkawire/client/core/producer/partitioner.py).
    Extension("kafkawire.client.core.producer._murmur2", ["kafkawire/client/core/producer/_murmur2.c"], optional=True),
    # Record keys, values and headers gathered into Arrow buffers (kafkawire/capture/tables/record_table.py).
    Extension("kafkawire.records._spans", ["kafkawire/records/_spans.c"], optional=True),
    # The capture readers' per-packet loop: pcapng/pcap runs, Ethernet/IP/TCP headers (kafkawire/capture/).
    Extension("kafkawire.capture.files._packets", ["kafkawire/capture/files/_packets.c"], optional=True),
])
