"""Every client quota config, under Kafka's names (``QuotaConfig``), with its default.

Quotas are set per user, client id, user and client id, or address, through
AlterClientQuotas or ``kafka-configs.sh --entity-type users/clients/ips``, and
stored with the entity (``metadata/entity_configs.py``). An entity with none set
is unlimited: the defaults are the largest values of each type, as in Kafka.
"""

from kpybroker.config.core import INT_MAX, LONG_MAX, ConfigKey, ConfigType, Importance, index_keys

LONG, DOUBLE, INT = ConfigType.LONG, ConfigType.DOUBLE, ConfigType.INT
HIGH = Importance.HIGH

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# fmt: off
#: The quotas of users and client ids (Kafka's ``QuotaConfig.userAndClientQuotaConfigs``).
CLIENT_QUOTA_CONFIGS: dict[str, ConfigKey] = index_keys([
    ConfigKey(PRODUCER_BYTE_RATE, LONG, LONG_MAX, HIGH, enforced=True,
              doc="Bytes per second a user or client id may produce, over the quota window; "
                  "above it, answers carry a throttle time and the connection is muted."),
    ConfigKey(CONSUMER_BYTE_RATE, LONG, LONG_MAX, HIGH, enforced=True,
              doc="Bytes per second a user or client id may fetch, over the quota window; a "
                  "throttled fetch is answered empty, with a throttle time."),
    ConfigKey(REQUEST_PERCENTAGE, DOUBLE, float(INT_MAX), HIGH, enforced=True,
              doc="Share of the broker's request handling time (100 is one thread's worth "
                  "per window) a user or client id may use."),
    ConfigKey(CONTROLLER_MUTATION_RATE, DOUBLE, float(INT_MAX), HIGH, enforced=True,
              doc="Partitions per second a user or client id may create or delete "
                  "(CreateTopics, CreatePartitions, DeleteTopics)."),
])

#: The quotas of client addresses (Kafka's ``QuotaConfig.ipConfigs``).
IP_QUOTA_CONFIGS: dict[str, ConfigKey] = index_keys([
    ConfigKey(CONNECTION_CREATION_RATE, INT, INT_MAX, HIGH, enforced=True,
              doc="New connections per second accepted from one address."),
])
# fmt: on
