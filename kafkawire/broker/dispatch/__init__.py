"""From a request to its answer:

- ``handlers``: the table from API key to the handler (the handlers themselves are in ``apis/``);
- ``versions``: the APIs and versions served, advertised in ApiVersions;
- ``coordinator_keys``: which group or transactional ids a coordinator request is for;
- ``error_responses``: the response a failing handler answers with.
"""
