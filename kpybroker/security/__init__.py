"""Who a client is and what it may do: TLS, SASL, principals and the ACL authorizer.

Everything here is independent of sockets: the server layer feeds it bytes and
certificates, and handlers ask it yes-or-no questions. It sits above the
metadata layer (SCRAM credentials and ACLs live in the metadata store, at
Kafka's ZooKeeper paths) and below the cluster layer (brokers authenticate to
one another with the same code).
"""
