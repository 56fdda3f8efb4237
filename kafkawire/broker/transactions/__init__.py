"""The transaction coordinator (KIP-98, KIP-447, KIP-890): transactional ids' state and its durable
log, producer ids, and the markers that end a transaction in every partition it wrote to."""
from .coordinator import TransactionCoordinator
from .markers import MarkerWriter
from .metadata import TransactionMetadata, TxnState
from .producer_ids import ProducerIdBlock
from .state_log import TransactionStateLog

__all__ = ["TransactionCoordinator", "MarkerWriter", "TransactionMetadata", "TxnState", "ProducerIdBlock",
           "TransactionStateLog"]
