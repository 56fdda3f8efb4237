"""kafkawire: the Apache Kafka wire protocol in Python.

Submodules load on first use, so ``import kafkawire`` stays cheap: ``kafkawire.messages`` holds the
generated codecs, ``kafkawire.framing`` the size-prefixed frames and headers.
"""
from .errors import DecodeError, EncodeError, KafkaWireError, UnsupportedVersionError

__version__ = "0.1.0"
__all__ = ["DecodeError", "EncodeError", "KafkaWireError", "UnsupportedVersionError", "__version__"]
