"""The broker's security: ACLs and the authorizer (``acls``)."""
