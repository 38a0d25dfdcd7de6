"""SASL mechanisms as sans-I/O state machines (PLAIN, SCRAM-SHA-256/512), shared by the
broker's authenticator and `moldau.client`. See `scram.py` and `plain.py`."""
