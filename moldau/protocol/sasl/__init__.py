"""SASL mechanisms as sans-I/O state machines (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER), shared by
the broker's authenticator and `moldau.client`. See `scram.py`, `plain.py` and `oauthbearer.py`
(with `jwt.py` and `token_validation.py`, how a broker judges a token)."""
