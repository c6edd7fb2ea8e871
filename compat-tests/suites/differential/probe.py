"""A scripted client for the differential suite: raw requests in, observations out.

A scenario is a function ``scenario(p: Probe) -> None`` that sends requests
with :meth:`Probe.call` (kpybroker's generated request classes, see
``compat/wire.py``) and records what a client would see with
:meth:`Probe.see` under a readable path. The same scenario runs against
Apache Kafka and against kpybroker; the two observation maps are compared
path by path. Values are kept comparable across brokers: error codes as
names, ids and addresses as shapes, everything JSON-friendly.

To ask "what does Kafka do here?", write a scenario and run
``compat-tests/run differential -k <name>``: both brokers' observations are
written to ``compat-tests/results/differential/observations/<name>.json``.

A scenario registered with :func:`secured_scenario` runs against the secured
pair instead (``secured.py``): its probe talks to the PLAINTEXT listener,
where the harness's ``User:ANONYMOUS`` is a super user, and
:meth:`Probe.session` opens connections to the TLS and SASL listeners, as a
chosen user or not logged in at all, that record into the same observations.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from compat.wire import ConnectionClosed, KafkaConnection
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import (
    create_topics,
    delete_topics,
    describe_configs,
    list_offsets,
    metadata,
    produce,
)
from kpybroker.protocol.records import NewRecord, build_batch

from . import whole

if TYPE_CHECKING:
    from .secured import PairedBroker

#: Seconds a connection waits for an answer (``KafkaConnection``'s default).
ANSWER_TIMEOUT = 30.0
#: Marks a path one broker reported and the other did not.
ABSENT = "<absent>"

#: Apache Kafka's API keys (``org.apache.kafka.common.protocol.ApiKeys``, 4.4), for readable paths.
API_NAMES = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 4: "LeaderAndIsr",
    5: "StopReplica", 6: "UpdateMetadata", 7: "ControlledShutdown", 8: "OffsetCommit",
    9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup",
    14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups", 17: "SaslHandshake",
    18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics", 21: "DeleteRecords",
    22: "InitProducerId", 23: "OffsetForLeaderEpoch", 24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn", 26: "EndTxn", 27: "WriteTxnMarkers", 28: "TxnOffsetCommit",
    29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls", 32: "DescribeConfigs",
    33: "AlterConfigs", 34: "AlterReplicaLogDirs", 35: "DescribeLogDirs", 36: "SaslAuthenticate",
    37: "CreatePartitions", 38: "CreateDelegationToken", 39: "RenewDelegationToken",
    40: "ExpireDelegationToken", 41: "DescribeDelegationToken", 42: "DeleteGroups",
    43: "ElectLeaders", 44: "IncrementalAlterConfigs", 45: "AlterPartitionReassignments",
    46: "ListPartitionReassignments", 47: "OffsetDelete", 48: "DescribeClientQuotas",
    49: "AlterClientQuotas", 50: "DescribeUserScramCredentials",
    51: "AlterUserScramCredentials", 52: "Vote", 53: "BeginQuorumEpoch", 54: "EndQuorumEpoch",
    55: "DescribeQuorum", 56: "AlterPartition", 57: "UpdateFeatures", 58: "Envelope",
    59: "FetchSnapshot", 60: "DescribeCluster", 61: "DescribeProducers",
    62: "BrokerRegistration", 63: "BrokerHeartbeat", 64: "UnregisterBroker",
    65: "DescribeTransactions", 66: "ListTransactions", 67: "AllocateProducerIds",
    68: "ConsumerGroupHeartbeat", 69: "ConsumerGroupDescribe", 70: "ControllerRegistration",
    71: "GetTelemetrySubscriptions", 72: "PushTelemetry", 73: "AssignReplicasToDirs",
    74: "ListConfigResources", 75: "DescribeTopicPartitions", 76: "ShareGroupHeartbeat",
    77: "ShareGroupDescribe", 78: "ShareFetch", 79: "ShareAcknowledge", 80: "AddRaftVoter",
    81: "RemoveRaftVoter", 82: "UpdateRaftVoter", 83: "InitializeShareGroupState",
    84: "ReadShareGroupState", 85: "WriteShareGroupState", 86: "DeleteShareGroupState",
    87: "ReadShareGroupStateSummary", 88: "StreamsGroupHeartbeat", 89: "StreamsGroupDescribe",
    90: "DescribeShareGroupOffsets", 91: "AlterShareGroupOffsets", 92: "DeleteShareGroupOffsets",
    93: "StreamsGroupTopologyDescriptionUpdate", 94: "UnregisterController",
}  # fmt: skip

#: DescribeConfigs' config_source numbers (``DescribeConfigsResponse.ConfigSource``).
CONFIG_SOURCES = {
    -1: "UNKNOWN", 0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG",
}  # fmt: skip
#: DescribeConfigs' config_type numbers (``DescribeConfigsResponse.ConfigType``).
CONFIG_TYPES = {
    0: "UNKNOWN", 1: "BOOLEAN", 2: "STRING", 3: "INT", 4: "SHORT", 5: "LONG", 6: "DOUBLE",
    7: "LIST", 8: "CLASS", 9: "PASSWORD",
}  # fmt: skip

Scenario = Callable[["Probe"], None]
#: Every scenario, by name, in definition order (filled by :func:`scenario`).
SCENARIOS: dict[str, Scenario] = {}
#: The names of the scenarios that run against the secured pair (:func:`secured_scenario`).
SECURED: set[str] = set()


def scenario(function: Scenario) -> Scenario:
    """Register a scenario under its function name."""
    SCENARIOS[function.__name__] = function
    return function


def secured_scenario(function: Scenario) -> Scenario:
    """Register a scenario that runs against the secured pair (``secured.py``)."""
    SECURED.add(function.__name__)
    return scenario(function)


def error(code: int) -> str:
    """An error code as Kafka names it (``UNKNOWN_TOPIC_OR_PARTITION``), or the number."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"ERROR_{code}"


def api_name(key: int) -> str:
    return f"{API_NAMES.get(key, 'Api')}({key})"


class Probe:
    """One broker, reached over one raw connection, and what a scenario saw on it."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        node_id: int = 0,
        *,
        secured: PairedBroker | None = None,
        connect: Callable[[], KafkaConnection] | None = None,
    ) -> None:
        self.name = name
        self.bootstrap = bootstrap
        self.host, port = bootstrap.rsplit(":", 1)
        self.port = int(port)
        self.node_id = node_id
        #: The secured broker this probe talks to (security scenarios only).
        self.secured = secured
        self.observed: dict[str, Any] = {}
        #: (API name, field path without indexes) of every field of every whole answer.
        self.answered: set[tuple[str, str]] = set()
        self._connect = connect or (
            lambda: KafkaConnection(bootstrap, client_id="compat-differential")
        )
        self._sessions: list[Probe] = []
        self.conn = self._connect()

    def session(
        self,
        listener: str,
        user: str | None = None,
        mechanism: str = "PLAIN",
        *,
        handshake_version: int = 1,
        authenticate_version: int = 2,
    ) -> Probe:
        """A connection to another listener of the secured broker, observed by this probe.

        As ``user`` (a client certificate on SSL, a SASL login with
        ``mechanism`` on the SASL listeners), or, without one, as the broker
        first sees it, to script the authentication itself. What it observes
        lands among this probe's observations; a connection the broker
        closes is opened again the same way.
        """
        if self.secured is None:
            raise AssertionError("Probe.session needs a @secured_scenario")
        secured = self.secured

        def connect() -> KafkaConnection:
            return secured.connect(
                listener,
                user,
                mechanism,
                handshake_version=handshake_version,
                authenticate_version=authenticate_version,
            )

        session = Probe(
            self.name, secured.address(listener), self.node_id, secured=secured, connect=connect
        )
        session.observed, session.answered = self.observed, self.answered
        self._sessions.append(session)
        return session

    # -- observing -------------------------------------------------------------------

    def see(self, path: str, value: Any) -> None:
        """Record an observation; a path seen twice is a scenario bug."""
        if path in self.observed:
            raise AssertionError(f"scenario observed {path!r} twice")
        self.observed[path] = value

    def node(self, node_id: int) -> Any:
        """This broker's own node id as ``"self"``; -1 and others as they are."""
        return "self" if node_id == self.node_id else node_id

    def address(self, host: str, port: int) -> str:
        return "self" if (host, port) == (self.host, self.port) else f"{host}:{port}"

    # -- talking ---------------------------------------------------------------------

    def call(self, request: Any, version: int) -> Any:
        """Send a request and decode the response (a closed connection raises)."""
        return self.conn.request(request, version)

    def answer(
        self,
        label: str,
        request: Any,
        version: int,
        *,
        varies: Iterable[str] = (),
        unordered: Iterable[str] = (),
        wait: float | None = None,
    ) -> Any:
        """Send ``request`` and observe its whole response under ``label`` (``whole.py``).

        Every field of ``version`` is an observation; ``varies`` names (fnmatch,
        below the label) the fields that may differ in this step, and why is
        said where the scenario names them; ``unordered`` the arrays whose
        order Kafka does not keep. A closed connection is observed
        as ``"closed"``; with ``wait``, an answer that has not come after that
        many seconds as ``"no answer"`` (for a broker known to leave a request
        unanswered). Returns the decoded response, or None when closed.
        """
        response = self.call_or_closed(request, version, wait)
        if isinstance(response, str):
            self.see(label, response)
            return None
        self.see_whole(label, request, version, response, varies, unordered)
        return response

    def see_whole(
        self,
        label: str,
        request: Any,
        version: int,
        response: Any,
        varies: Iterable[str] = (),
        unordered: Iterable[str] = (),
    ) -> None:
        """Observe every field of a response already received (see :meth:`answer`)."""
        where = whole.Where(self.host, self.port)
        flat = whole.flatten(response, request, version, where, varies, unordered)
        api = whole.api_name(whole.module_of(request))
        for path, value in flat.items():
            self.see(f"{label}/{path}", value)
            self.answered.add((api, whole.general(path)))

    def call_or_closed(self, request: Any, version: int, wait: float | None = None) -> Any:
        """Like :meth:`call`, but a connection the broker closed returns ``"closed"``, and
        one that has not answered within ``wait`` seconds (when given) ``"no answer"``."""
        if wait is not None:
            self.conn.sock.settimeout(wait)
        try:
            return self.call(request, version)
        except ConnectionClosed:
            self.reconnect()
            return "closed"
        except TimeoutError:
            if wait is None:
                raise
            self.reconnect()
            return "no answer"
        finally:
            if wait is not None:
                self.conn.sock.settimeout(ANSWER_TIMEOUT)

    def raw(
        self, api_key: int, version: int, body: bytes = b"", *, flexible: bool = True
    ) -> bytes | str:
        """Send a hand-made request; the response frame, or ``"closed"``.

        The header is v2 (with an empty tag section) when ``flexible``, as a
        client sends for any version past the API's first flexible one, else v1.
        """
        client = b"compat-differential"
        header = struct.pack(">hhih", api_key, version, 999_999, len(client)) + client
        if flexible:
            header += b"\x00"
        try:
            self.conn.send_frame(struct.pack(">i", len(header) + len(body)) + header + body)
            self.conn.sock.settimeout(10)
            return self.conn.recv_frame()
        except (ConnectionClosed, TimeoutError):
            self.reconnect()
            return "closed"

    def see_connection(self, label: str) -> None:
        """Observe whether the broker still serves this connection, by asking ApiVersions v0.

        ``"open"`` when it answers without an error, ``"closed"`` when it closes
        instead (as after a failed authentication; the next step reconnects),
        and for an error answer (an ApiVersions out of turn in a SASL exchange)
        the error and whether a second ApiVersions is then answered.
        """
        answer = self.raw(18, 0, flexible=False)
        if isinstance(answer, str):
            self.see(label, answer)
            return
        (code,) = struct.unpack_from(">h", answer, 4)  # after the correlation id
        if code == 0:
            self.see(label, "open")
            return
        again = self.raw(18, 0, flexible=False)
        self.see(label, f"answered {error(code)}, then {'closed' if again == 'closed' else 'open'}")

    def reconnect(self) -> None:
        self.conn.close()
        self.conn = self._connect()

    def close(self) -> None:
        for session in self._sessions:
            session.close()
        self.conn.close()

    # -- helpers shared by scenarios -------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        configs: dict[str, str] | None = None,
        *,
        replication: int = 1,
        validate_only: bool = False,
    ) -> Any:
        """CreateTopics v7 for one topic; returns its result (error_code, num_partitions...)."""
        request = create_topics.CreateTopicsRequest(
            topics=[
                create_topics.CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=replication,
                    assignments=[],
                    configs=[
                        create_topics.CreatableTopicConfig(name=k, value=v)
                        for k, v in (configs or {}).items()
                    ],
                )
            ],
            timeout_ms=30000,
            validate_only=validate_only,
        )
        [result] = self.call(request, 7).topics
        if result.error_code == 0 and not validate_only:
            self.wait_until_served(name, result.num_partitions)
        return result

    def delete_topic(self, name: str) -> str:
        """DeleteTopics v6 of one topic by name; its error's name."""
        request = delete_topics.DeleteTopicsRequest(
            topics=[delete_topics.DeleteTopicState(name=name, topic_id=bytes(16))],
            timeout_ms=30000,
        )
        [result] = self.call(request, 6).responses
        return error(result.error_code)

    def retry(self, attempt: Callable[[], Any], ready: Callable[[Any], bool], what: str) -> Any:
        """Repeat ``attempt()`` until ``ready(result)``, as clients retry retriable errors.

        A new KRaft broker needs a moment before a new topic's partitions are
        served, and before an internal topic (__consumer_offsets, the producer
        id block) is loaded; clients retry through it, and so do scenarios,
        which then observe the settled answer.
        """
        deadline = time.monotonic() + 30
        while True:
            result = attempt()
            if ready(result):
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: {what} not ready after 30 s: {result}")
            time.sleep(0.1)

    def wait_until_served(self, topic: str, partitions: int) -> None:
        """Until Metadata shows every partition's leader and each answers ListOffsets."""
        self.wait_for_leaders(topic, partitions)
        for partition in range(partitions):
            self.retry(
                lambda p=partition: self.list_offset(topic, p, -1),
                lambda answer: answer[0] == "NONE",
                f"{topic}-{partition}",
            )

    def metadata(
        self, topics: Iterable[str] | None, *, version: int = 12, auto_create: bool = False
    ) -> Any:
        request = metadata.MetadataRequest(
            topics=None
            if topics is None
            else [metadata.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=auto_create,
            include_topic_authorized_operations=False,
        )
        return self.call(request, version)

    def wait_for_leaders(self, topic: str, partitions: int, timeout: float = 20) -> None:
        """Until Metadata shows every partition of ``topic`` with a leader (KRaft lags a little)."""
        deadline = time.monotonic() + timeout
        while True:
            [info] = self.metadata([topic]).topics
            if (
                info.error_code == 0
                and len(info.partitions) == partitions
                and all(p.leader_id >= 0 for p in info.partitions)
            ):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: {topic} has no leaders after {timeout} s")
            time.sleep(0.1)

    def produce(
        self, topic: str, partition: int, records: bytes | None, *, version: int = 9, acks: int = -1
    ) -> Any:
        """Produce one batch (or raw bytes) to one partition; the partition's response."""
        request = produce.ProduceRequest(
            transactional_id=None,
            acks=acks,
            timeout_ms=10000,
            topic_data=[
                produce.TopicProduceData(
                    name=topic,
                    partition_data=[produce.PartitionProduceData(index=partition, records=records)],
                )
            ],
        )
        response = self.call(request, version)
        [topic_response] = response.responses
        [part] = topic_response.partition_responses
        return part

    def list_offset(
        self, topic: str, partition: int, timestamp: int, *, version: int = 8
    ) -> tuple[str, int, int]:
        """ListOffsets for one partition: ``(error name, offset, timestamp)``."""
        request = list_offsets.ListOffsetsRequest(
            replica_id=-1,
            isolation_level=0,
            topics=[
                list_offsets.ListOffsetsTopic(
                    name=topic,
                    partitions=[
                        list_offsets.ListOffsetsPartition(
                            partition_index=partition, timestamp=timestamp
                        )
                    ],
                )
            ],
        )
        [topic_response] = self.call(request, version).topics
        [part] = topic_response.partitions
        return error(part.error_code), part.offset, part.timestamp

    def describe_configs(
        self,
        resource_type: int,
        name: str,
        *,
        keys: list[str] | None = None,
        synonyms: bool = False,
        documentation: bool = False,
    ) -> Any:
        """DescribeConfigs v4 of one resource (2 topic, 4 broker, 8 broker loggers, 32 group):
        its configs named in ``keys`` (None: all), without synonyms unless asked."""
        request = describe_configs.DescribeConfigsRequest(
            resources=[
                describe_configs.DescribeConfigsResource(
                    resource_type=resource_type, resource_name=name, configuration_keys=keys
                )
            ],
            include_synonyms=synonyms,
            include_documentation=documentation,
        )
        [result] = self.call(request, 4).results
        return result


def batch(values: Iterable[bytes], *, timestamp: int | None = None, **kwargs: Any) -> bytes:
    """An uncompressed record batch v2 of key-less records (kpybroker's own encoder)."""
    return build_batch([NewRecord(None, v) for v in values], timestamp=timestamp, **kwargs)
