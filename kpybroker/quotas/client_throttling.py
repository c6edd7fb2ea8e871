"""Who waits out a throttle: the rule of KIP-219, per API key and version.

Since Kafka 2.0 a broker never delays a throttled response. Whatever the version, it sends
the response at once with ``throttle_time_ms`` set, then mutes the connection (reads no
further request from it) for that long. What depends on the version is the *client*: from
the version below on, a Java client also holds back its own requests to that broker for
``throttle_time_ms`` (``AbstractResponse.shouldClientThrottle``); an older client keeps
sending, and its requests wait in the socket until the broker unmutes it. Before 2.0 the
broker delayed the response instead, for every version; no Kafka still does.

So the network layer needs no table to throttle; this one says what clients do, for logs,
metrics and tests. It is the rule of the Kafka 4.4 clients: a response whose schema has
``throttle_time_ms`` tells the client to throttle, except where a response class says
otherwise (Produce before v6, Fetch before v8, Metadata before v6, ...). Keys not listed
never make the client throttle (inter-broker and SASL APIs, Raft, share-group state).
"""

from __future__ import annotations

#: API key -> first version whose response makes a Kafka 4.4 client throttle itself.
CLIENT_THROTTLES_SINCE: dict[int, int] = {
    0: 6,  # Produce
    1: 8,  # Fetch
    2: 3,  # ListOffsets
    3: 6,  # Metadata
    8: 4,  # OffsetCommit
    9: 4,  # OffsetFetch
    10: 2,  # FindCoordinator
    11: 3,  # JoinGroup
    12: 2,  # Heartbeat
    13: 2,  # LeaveGroup
    14: 2,  # SyncGroup
    15: 2,  # DescribeGroups
    16: 2,  # ListGroups
    18: 2,  # ApiVersions
    19: 3,  # CreateTopics
    20: 2,  # DeleteTopics
    21: 1,  # DeleteRecords
    22: 1,  # InitProducerId
    23: 2,  # OffsetForLeaderEpoch (throttle_time_ms from v2)
    24: 1,  # AddPartitionsToTxn
    25: 1,  # AddOffsetsToTxn
    26: 1,  # EndTxn
    28: 1,  # TxnOffsetCommit
    29: 1,  # DescribeAcls
    30: 1,  # CreateAcls
    31: 1,  # DeleteAcls
    32: 2,  # DescribeConfigs
    33: 1,  # AlterConfigs
    34: 1,  # AlterReplicaLogDirs
    35: 1,  # DescribeLogDirs
    37: 1,  # CreatePartitions
    38: 1,  # CreateDelegationToken
    39: 1,  # RenewDelegationToken
    40: 1,  # ExpireDelegationToken
    41: 1,  # DescribeDelegationToken
    42: 1,  # DeleteGroups
    43: 0,  # ElectLeaders
    44: 0,  # IncrementalAlterConfigs
    45: 0,  # AlterPartitionReassignments
    46: 0,  # ListPartitionReassignments
    47: 0,  # OffsetDelete
    48: 0,  # DescribeClientQuotas
    49: 0,  # AlterClientQuotas
    50: 0,  # DescribeUserScramCredentials
    51: 0,  # AlterUserScramCredentials
    56: 2,  # AlterPartition
    57: 0,  # UpdateFeatures
    59: 0,  # FetchSnapshot
    60: 0,  # DescribeCluster
    61: 0,  # DescribeProducers
    62: 0,  # BrokerRegistration
    63: 0,  # BrokerHeartbeat
    64: 0,  # UnregisterBroker
    65: 0,  # DescribeTransactions
    66: 0,  # ListTransactions
    67: 0,  # AllocateProducerIds
    68: 0,  # ConsumerGroupHeartbeat
    69: 0,  # ConsumerGroupDescribe
    70: 0,  # ControllerRegistration
    71: 0,  # GetTelemetrySubscriptions
    72: 0,  # PushTelemetry
    73: 0,  # AssignReplicasToDirs
    74: 0,  # ListConfigResources
    75: 0,  # DescribeTopicPartitions
    76: 1,  # ShareGroupHeartbeat
    77: 1,  # ShareGroupDescribe
    78: 1,  # ShareFetch
    79: 1,  # ShareAcknowledge
    80: 0,  # AddRaftVoter
    81: 0,  # RemoveRaftVoter
    82: 0,  # UpdateRaftVoter
    88: 0,  # StreamsGroupHeartbeat
    89: 0,  # StreamsGroupDescribe
    90: 0,  # DescribeShareGroupOffsets
    91: 0,  # AlterShareGroupOffsets
    92: 0,  # DeleteShareGroupOffsets
    93: 0,  # StreamsGroupTopologyDescriptionUpdate
    94: 0,  # UnregisterController
}


def client_throttles(api_key: int, api_version: int) -> bool:
    """Whether a client receiving this response throttles itself (KIP-219)."""
    since = CLIENT_THROTTLES_SINCE.get(api_key)
    return since is not None and api_version >= since
