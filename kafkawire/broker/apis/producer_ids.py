"""InitProducerId for idempotent producers: ids unique across restarts, an epoch bump for a producer
that asks with its own id (KIP-360)."""
from __future__ import annotations

import json
from pathlib import Path

from ... import messages as m
from ...error_codes import ErrorCode
from ..atomic_file import write_json_atomically
from ..security.acls import Operation, ResourceType
from .state import BrokerState, RequestContext

__all__ = ["ProducerIdApi"]


class ProducerIdApi:
    def __init__(self, state: BrokerState):
        self.state = state
        self.producer_ids = ProducerIdBlock(state.config.data_dir / "producer_ids.json")

    async def init_producer_id(self, request, version: int, context: RequestContext):
        if request.transactional_id is not None:
            return m.InitProducerIdResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                            producer_id=-1, producer_epoch=-1)
        if not self._may_write(context):  # IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (KIP-679)
            return m.InitProducerIdResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, producer_id=-1,
                                            producer_epoch=-1)
        if version >= 3 and request.producer_id >= 0:
            # an idempotent producer bumping its epoch keeps its id (KIP-360)
            epoch = request.producer_epoch + 1
            if epoch <= 0x7FFF:
                return m.InitProducerIdResponse(error_code=0, producer_id=request.producer_id, producer_epoch=epoch)
        return m.InitProducerIdResponse(error_code=0, producer_id=self.producer_ids.next(), producer_epoch=0)

    def _may_write(self, context: RequestContext) -> bool:
        state = self.state
        if state.authorizer is None or state.allowed(context, Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER,
                                                     "kafka-cluster"):
            return True
        return any(state.allowed(context, Operation.WRITE, ResourceType.TOPIC, name) for name in state.topics.topics)


class ProducerIdBlock:
    """Producer ids, unique across restarts: the next free id is persisted before ids are handed out,
    a block at a time, as Kafka's controller allocates them."""

    BLOCK = 1000

    def __init__(self, path: Path):
        self.path = path
        self._next = 0
        self._end = 0

    def next(self) -> int:
        if self._next >= self._end:
            start = json.loads(self.path.read_text())["next"] if self.path.exists() else 0
            self._next, self._end = start, start + self.BLOCK
            write_json_atomically(self.path, {"next": self._end})  # before any id of the block is used
        self._next += 1
        return self._next - 1
