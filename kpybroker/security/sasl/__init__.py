"""SASL: the mechanisms (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER), server and client sides."""
