"""Every exception the client raises, by where it comes from. Names and bases follow Kafka's clients
where Kafka has the exception (BufferExhaustedException, CorruptRecordException, ...)."""
from __future__ import annotations

from kafkawire.error_codes import ErrorCode
from kafkawire.errors import KafkaWireError

from .core.topic_partition import TopicPartition

__all__ = [
    "ConfigError",
    "KafkaError", "KafkaConnectionError", "KafkaTimeoutError", "RequestTimedOut", "IncompatibleBrokerError",
    "UnknownTopicError",
    "AuthorizationException", "TopicAuthorizationException", "GroupAuthorizationException",
    "ClusterAuthorizationException", "error_for_code",
    "AuthenticationException", "SaslAuthenticationException", "UnsupportedSaslMechanismException",
    "IllegalSaslStateException", "SslAuthenticationException",
    "BufferExhausted", "PoolClosed", "RecordTooLarge", "AccumulatorClosed", "DeliveryTimeout", "ProducerClosed",
    "FetchError", "CorruptRecordException", "OffsetOutOfRangeException", "NoOffsetForPartitionException",
    "PartitionFetchError", "ConsumerClosed",
    "GroupError", "CommitFailedError", "RebalanceInProgressError",
    "TransactionError", "TransactionFatalError", "ProducerFencedError", "TransactionalIdAuthorizationError",
    "TransactionAbortableError", "TransactionAbortedError", "TransactionTimeout", "TransactionStateError",
]


# ---- configuration -------------------------------------------------------------------------------

class ConfigError(KafkaWireError):
    """A configuration value Kafka would refuse; the message names the property."""


# ---- brokers and connections ---------------------------------------------------------------------

class KafkaError(Exception):
    """An error code in a broker's response that the operation cannot get past."""

    def __init__(self, code: int, message: str = ""):
        name = ErrorCode.of(code)
        self.code = code
        self.name = name.name if isinstance(name, ErrorCode) else f"error code {code}"
        self.retriable = name.retriable if isinstance(name, ErrorCode) else False
        super().__init__(f"{self.name}: {message}" if message else self.name)


class KafkaConnectionError(ConnectionError):
    """A connection failed, closed, or a request on it went unanswered."""


class KafkaTimeoutError(TimeoutError):
    """Kafka's TimeoutException: a call did not complete within its timeout (``default.api.timeout.ms``
    or the timeout it was given; the producer's ``max.block.ms``). The message names the call, the
    broker(s) it was waiting for and the last cause."""


class RequestTimedOut(KafkaConnectionError, KafkaTimeoutError):
    """No response within the request's timeout (``request.timeout.ms``); the connection was closed."""


class IncompatibleBrokerError(KafkaWireError):
    """The broker does not serve any version of an API that this client speaks."""


class UnknownTopicError(KafkaError):
    """A topic the cluster does not have (and would not create), or whose metadata did not arrive in time."""


# ---- authorization (Kafka's AuthorizationException and its subclasses): the principal lacks an ACL --------

class AuthorizationException(KafkaError):
    """The broker's authorizer denied the operation: the principal needs an ACL, not a retry."""


class TopicAuthorizationException(AuthorizationException):
    """TOPIC_AUTHORIZATION_FAILED: no permission on the topic for this operation."""


class GroupAuthorizationException(AuthorizationException):
    """GROUP_AUTHORIZATION_FAILED: no permission on the consumer group."""


class ClusterAuthorizationException(AuthorizationException):
    """CLUSTER_AUTHORIZATION_FAILED: no permission on the cluster resource."""


_BY_CODE: dict[int, type[KafkaError]] = {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: UnknownTopicError, ErrorCode.UNKNOWN_TOPIC_ID: UnknownTopicError,
            ErrorCode.TOPIC_AUTHORIZATION_FAILED: TopicAuthorizationException,
            ErrorCode.GROUP_AUTHORIZATION_FAILED: GroupAuthorizationException,
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED: ClusterAuthorizationException}


def error_for_code(code: int, message: str = "") -> KafkaError:
    """The exception for a broker's error ``code``: the class Kafka's clients name for it where the client
    has one (unknown topic, authorization), KafkaError otherwise."""
    return _BY_CODE.get(code, KafkaError)(code, message)


# ---- authentication (Kafka's AuthenticationException and its subclasses) --------------------------

class AuthenticationException(KafkaConnectionError):
    """A connection that failed to authenticate (TLS or SASL). Not retriable: the client stops
    connecting and raises it from the calls that need a broker, until it is closed (the credentials or
    certificates have to change first). ``code`` is Kafka's error code where the broker sent one."""

    code: int | None = None

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        if code is not None:
            self.code = code


class SaslAuthenticationException(AuthenticationException):
    """The SASL exchange failed: wrong credentials, a token the broker refused, or a broker that could
    not prove it holds the SCRAM credential (SASL_AUTHENTICATION_FAILED)."""

    code = ErrorCode.SASL_AUTHENTICATION_FAILED


class UnsupportedSaslMechanismException(AuthenticationException):
    """The broker does not enable the configured ``sasl.mechanism`` (UNSUPPORTED_SASL_MECHANISM)."""

    code = ErrorCode.UNSUPPORTED_SASL_MECHANISM


class IllegalSaslStateException(AuthenticationException):
    """The broker refused a SASL request in its state, e.g. SASL on a listener without it (ILLEGAL_SASL_STATE)."""

    code = ErrorCode.ILLEGAL_SASL_STATE


class SslAuthenticationException(AuthenticationException):
    """The TLS handshake failed: an untrusted or expired certificate, a host name the broker's certificate
    does not name (``ssl.endpoint.identification.algorithm``), or a broker that refused this client's
    certificate."""


# ---- the producer --------------------------------------------------------------------------------

class BufferExhausted(KafkaTimeoutError):
    """No memory for a batch within ``max.block.ms`` (Kafka's BufferExhaustedException)."""


class PoolClosed(RuntimeError):
    """The producer closed while a batch was waiting for memory."""


class RecordTooLarge(KafkaWireError):
    """A record bigger than ``max.request.size`` or ``buffer.memory`` (Kafka's RecordTooLargeException)."""


class AccumulatorClosed(RuntimeError):
    """An append after the producer was closed."""


class DeliveryTimeout(KafkaTimeoutError):
    """A batch not acknowledged within ``delivery.timeout.ms`` of its creation."""


class ProducerClosed(RuntimeError):
    """``send`` after ``close``, or a record that ``close`` could not deliver."""


# ---- the consumer: fetching ----------------------------------------------------------------------

class FetchError(KafkaWireError):
    """A partition's fetch failed in a way the application must hear about; raised by ``poll``."""

    def __init__(self, message: str, topic_partition: TopicPartition, offset: int | None):
        super().__init__(message)
        self.topic_partition = topic_partition
        self.offset = offset


class CorruptRecordException(FetchError):
    """Corrupt or truncated records (Kafka's CorruptRecordException). The partition is stopped at
    ``offset``; ``next_offset`` (when the bad batch's header could be read) is where a seek skips it."""

    def __init__(self, message: str, topic_partition: TopicPartition, offset: int | None,
                 next_offset: int | None = None):
        super().__init__(message, topic_partition, offset)
        self.next_offset = next_offset


class OffsetOutOfRangeException(FetchError):
    """The fetch offset is outside the log and auto.offset.reset is none."""


class NoOffsetForPartitionException(FetchError):
    """A position reset was needed and auto.offset.reset is none."""


class PartitionFetchError(FetchError):
    """A broker error for one partition that neither a metadata refresh nor a reset handles
    (e.g. TOPIC_AUTHORIZATION_FAILED); the partition is retried after retry.backoff.ms."""

    def __init__(self, message: str, topic_partition: TopicPartition, offset: int | None, error_code: int):
        super().__init__(message, topic_partition, offset)
        self.error_code = error_code


class ConsumerClosed(RuntimeError):
    """A call on a closed consumer."""


# ---- the consumer: groups and commits ------------------------------------------------------------

class GroupError(KafkaWireError):
    """A group request failed; ``error_code`` is Kafka's code (None for a client-side failure)."""

    def __init__(self, message: str, error_code: int | None = None):
        super().__init__(message)
        self.error_code = error_code

    @property
    def retriable(self) -> bool:
        code = ErrorCode.of(self.error_code) if self.error_code is not None else None
        return isinstance(code, ErrorCode) and code.retriable


class CommitFailedError(GroupError):
    """The commit cannot succeed: the member is no longer in the generation the offsets belong to."""


class RebalanceInProgressError(GroupError):
    """The group is rebalancing; commit again once the member has its new assignment."""


# ---- transactions --------------------------------------------------------------------------------

class TransactionError(KafkaWireError):
    """A transactional producer's error, classified as confluent-kafka's KafkaError classifies them:
    ``fatal()`` (the producer can do nothing more: close it), ``txn_requires_abort()`` (abort the
    transaction, then carry on), ``retriable()`` (make the same call again). ``code`` is Kafka's error
    code (None for an error of the client's own); ``name`` its name."""

    _FATAL = False
    _ABORTABLE = False
    _RETRIABLE = False
    code: int | None = None

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def name(self) -> str | None:
        if self.code is None:
            return None
        known = ErrorCode.of(self.code)
        return known.name if isinstance(known, ErrorCode) else f"error code {self.code}"

    def fatal(self) -> bool:
        return self._FATAL

    def txn_requires_abort(self) -> bool:
        return self._ABORTABLE

    def retriable(self) -> bool:
        return self._RETRIABLE


class TransactionFatalError(TransactionError):
    """The producer cannot go on (INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING, UNSUPPORTED_VERSION,
    an error Kafka does not expect): every later call raises it; close the producer."""

    _FATAL = True


class ProducerFencedError(TransactionFatalError):
    """A newer producer with the same transactional.id has initialized (PRODUCER_FENCED, or
    INVALID_PRODUCER_EPOCH from the transaction coordinator): this one is a zombie and must close."""

    code = ErrorCode.PRODUCER_FENCED


class TransactionalIdAuthorizationError(TransactionFatalError):
    """The principal may not use the transactional.id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)."""

    code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


class TransactionAbortableError(TransactionError):
    """The current transaction cannot commit (a record it holds failed, TOPIC_AUTHORIZATION_FAILED,
    GROUP_AUTHORIZATION_FAILED, TRANSACTION_ABORTABLE, a delivery timeout...): abort it, and the
    producer can begin the next one. ``code`` is the underlying error's code, when the broker sent one."""

    _ABORTABLE = True


class TransactionAbortedError(TransactionError):
    """A record that was never sent because its transaction was aborted (Kafka's
    TransactionAbortedException); its future fails with this."""


class TransactionTimeout(TransactionError, KafkaTimeoutError):
    """A transactional call did not complete within its timeout. Retriable: call it again (the same
    call), and it goes on waiting for the same request, as Kafka's producer does."""

    _RETRIABLE = True
    code = ErrorCode.REQUEST_TIMED_OUT


class TransactionStateError(TransactionError):
    """A transactional call made in the wrong state (begin_transaction twice, a send outside a
    transaction, another call while a timed-out one is pending...: Kafka's IllegalStateException).
    The producer's state is unchanged."""
