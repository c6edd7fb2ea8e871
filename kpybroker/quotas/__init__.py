"""Client quotas and connection limits, as Kafka enforces them.

Byte rates, request time and controller mutations per user and client id
(``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``,
``controller_mutation_rate``), measured in sampled windows; and the limits on
connections per broker, per listener and per address. The network layer mutes
a throttled channel; handlers only report what a request cost.
"""
