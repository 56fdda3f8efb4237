"""InitProducerId: for idempotent producers, ids unique across restarts and an epoch bump for a producer
that asks with its own id (KIP-360); with a transactional id, the transaction coordinator's answer
(WRITE on the transactional id required)."""
from __future__ import annotations

from ... import messages as m
from ...error_codes import ErrorCode
from ...acl_types import AclOperation as Operation, ResourceType
from ..transactions.coordinator import TransactionCoordinator
from ..transactions.producer_ids import ProducerIdBlock
from .state import BrokerState, RequestContext

__all__ = ["ProducerIdApi"]


class ProducerIdApi:
    def __init__(self, state: BrokerState, producer_ids: ProducerIdBlock, coordinator: TransactionCoordinator):
        self.state = state
        self.producer_ids = producer_ids
        self.coordinator = coordinator

    async def init_producer_id(self, request: m.InitProducerIdRequest, version: int,
                               context: RequestContext) -> m.InitProducerIdResponse:
        if request.transactional_id is not None:
            return self._transactional(request, request.transactional_id, version, context)
        if not self._may_write(context):  # IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (KIP-679)
            return m.InitProducerIdResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, producer_id=-1,
                                            producer_epoch=-1)
        if version >= 3 and request.producer_id >= 0:
            # an idempotent producer bumping its epoch keeps its id (KIP-360)
            epoch = request.producer_epoch + 1
            if epoch <= 0x7FFF:
                return m.InitProducerIdResponse(error_code=0, producer_id=request.producer_id, producer_epoch=epoch)
        return m.InitProducerIdResponse(error_code=0, producer_id=self.producer_ids.next(), producer_epoch=0)

    def _transactional(self, request: m.InitProducerIdRequest, transactional_id: str, version: int,
                       context: RequestContext) -> m.InitProducerIdResponse:
        if not self.state.allowed(context, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return m.InitProducerIdResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                            producer_id=-1, producer_epoch=-1)
        expected = (request.producer_id, request.producer_epoch) if version >= 3 else (-1, -1)
        result = self.coordinator.init_producer_id(transactional_id, request.transaction_timeout_ms, *expected)
        error = result.error
        if error == ErrorCode.PRODUCER_FENCED and version < 4:
            error = ErrorCode.INVALID_PRODUCER_EPOCH  # PRODUCER_FENCED is known from v4 (KIP-588)
        return m.InitProducerIdResponse(error_code=error, producer_id=result.producer_id,
                                        producer_epoch=result.producer_epoch)

    def _may_write(self, context: RequestContext) -> bool:
        state = self.state
        if state.authorizer is None or state.allowed(context, Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER,
                                                     "kafka-cluster"):
            return True
        return state.authorizer.authorize_any(context.principal, context.client_host, Operation.WRITE,
                                              ResourceType.TOPIC)
