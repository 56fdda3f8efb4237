"""Client quotas (KIP-13, KIP-124, KIP-219, KIP-599, KIP-612): the quotas configured by entity
(``store``), the rates they are checked against (``rates``) and the throttling of clients over them
(``throttling``)."""
from .store import ClientQuotaStore, QuotaError
from .throttling import ClientQuotas, MutationQuota

__all__ = ["ClientQuotaStore", "QuotaError", "ClientQuotas", "MutationQuota"]
