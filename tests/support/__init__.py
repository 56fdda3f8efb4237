"""What the tests share: brokers as processes and in threads, raw wire clients, captures made on
loopback, synthetic data, peers' codecs, and where the repository and the reference data are."""
