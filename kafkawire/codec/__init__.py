"""The hand-written run-time support of the generated codecs in ``kafkawire.messages``.

``primitives`` holds the wire helpers the generated readers and writers call off their fast paths,
``failures`` turns a failed read or write into a DecodeError/EncodeError with its field path, and
``base`` the classes every generated message and struct derives from.
"""
