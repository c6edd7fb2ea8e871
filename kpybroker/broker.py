"""The broker: wires the metadata store, the logs, the partitions and the listeners.

Start-up order matters for safety: logs are loaded (and recovered) before
the listeners accept anything, and the broker registers itself only once it
can serve. The "ready" line is logged last, when connections are accepted.

Replication and the controller live in ``kpybroker.cluster``; this module only
feeds them the metadata changes and starts their tasks.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kpybroker.apis.support.context import Services
from kpybroker.apis.support.metadata_answers import TopicAnswers
from kpybroker.cluster.controller import Controller
from kpybroker.cluster.offline_replicas import OfflineReplicaQuery
from kpybroker.cluster.registration import register
from kpybroker.cluster.replica_manager import ReplicaManager
from kpybroker.cluster.replication_settings import ReplicationSettings
from kpybroker.cluster.view import ClusterView
from kpybroker.config import BrokerConfig, ConfigError, Listener, effective_topic_config
from kpybroker.config.quota_table import CONNECTION_CREATION_RATE
from kpybroker.coordinator.coordinator_settings import CoordinatorSettings
from kpybroker.coordinator.service import GroupCoordinator
from kpybroker.log.log_config import LogConfig, LogManagerConfig
from kpybroker.log.log_manager import LogManager
from kpybroker.log.names import METADATA_STORE_DIR
from kpybroker.log.open_files import OPEN_FILES
from kpybroker.metadata.builtin import BuiltinMetadataStore
from kpybroker.metadata.cluster_metadata import ClusterMetadata
from kpybroker.metadata.entity_configs import IP, Entity, EntityConfigs
from kpybroker.metadata.model import ChangeKind, Endpoint, MetadataChange
from kpybroker.metadata.store import MetadataStore
from kpybroker.metadata.znodes import DEFAULT_BROKER_ENTITY
from kpybroker.metrics.broker_metrics import BrokerMetrics
from kpybroker.producer_ids import ProducerIdManager
from kpybroker.quotas.connection_quotas import ConnectionQuotas
from kpybroker.quotas.entity import DEFAULT, ClientQuotaEntity
from kpybroker.quotas.quota_managers import QuotaManagers
from kpybroker.quotas.settings import QuotaSettings, connection_limits
from kpybroker.security.acls.acl_store import AclStore
from kpybroker.security.acls.authorizer import (
    ALLOW_EVERYONE_IF_NO_ACL_FOUND_CONFIG,
    SUPER_USERS_CONFIG,
    configured_authorizer,
)
from kpybroker.security.client_security import inter_broker_security
from kpybroker.security.listener_security import ListenerSecurity, listener_security
from kpybroker.security.scram_users import credential_lookup
from kpybroker.server.acceptor import Acceptor
from kpybroker.server.connection import ListenerSettings
from kpybroker.server.connection_gate import ConnectionGate
from kpybroker.server.heap_freezer import HeapFreezer
from kpybroker.server.idle_connections import close_idle_connections
from kpybroker.server.listener import bound_port, start_listener
from kpybroker.server.request_budget import RequestBudget
from kpybroker.share_coordinator.service import ShareCoordinator
from kpybroker.share_coordinator.share_coordinator_settings import ShareCoordinatorSettings
from kpybroker.share_coordinator.state_persister import DefaultStatePersister
from kpybroker.share_partitions.share_partition_manager import SharePartitionManager
from kpybroker.share_partitions.share_settings import ShareSettingsCache
from kpybroker.topic_admin import TopicManager
from kpybroker.transaction_coordinator.marker_writer import TxnMarkerWriter
from kpybroker.transaction_coordinator.partition_verifier import (
    PartitionVerifier,
    VerifierSettings,
)
from kpybroker.transaction_coordinator.service import TransactionCoordinator
from kpybroker.transaction_coordinator.transaction_settings import TransactionSettings

if TYPE_CHECKING:
    from kpybroker.console import Console
    from kpybroker.server.http_listener import HttpListener

log = logging.getLogger(__name__)

HOUSEKEEPING_INTERVAL_S = 1.0
#: How long a starting broker waits for the logs it is assigned and lacks before it serves
#: anyway (a log directory that cannot make them must not keep it down).
STARTUP_LOGS_WAIT_S = 60.0


def open_metadata_store(config: BrokerConfig) -> MetadataStore:
    """ZooKeeper when ``zookeeper.connect`` is set; else the built-in store in the data
    directory (``metadata.log.dir``, else the first log dir)."""
    connect = config.get_str("zookeeper.connect")
    if connect:
        # Here, not at the top: kazoo costs every other broker 15 ms of start-up.
        from kpybroker.metadata.zookeeper import ZooKeeperMetadataStore

        connection = "zookeeper.connection.timeout.ms"  # unset: the session timeout
        return ZooKeeperMetadataStore(
            connect,
            session_timeout_ms=config.get_int("zookeeper.session.timeout.ms"),
            connection_timeout_ms=config.get_int(connection) if config.get(connection) else None,
        )
    base = config.get("metadata.log.dir") or config.log_dirs()[0]
    return BuiltinMetadataStore(Path(base) / METADATA_STORE_DIR)


class Broker:
    """Builds the services, wires them together and runs them; serves nothing itself.

    The request handlers get the services (``Services``), never the broker.
    """

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id: int = config.get("broker.id")
        self.connections: set = set()
        self.replicas = ReplicaManager(self.broker_id)
        self.controller: Controller | None = None
        self.offline_replicas: OfflineReplicaQuery | None = None
        self.topics: TopicManager | None = None
        self.store: MetadataStore | None = None
        self.cluster: ClusterMetadata | None = None
        self.logs: LogManager | None = None
        self.producer_ids: ProducerIdManager | None = None
        self.coordinator: GroupCoordinator | None = None
        self.transactions: TransactionCoordinator | None = None
        self.txn_verifier: PartitionVerifier | None = None
        self.share_coordinator: ShareCoordinator | None = None
        #: How share partitions' state is read and written (KIP-932), wherever its coordinator is.
        self.share_persister: DefaultStatePersister | None = None
        self.share_partitions: SharePartitionManager | None = None
        self.view: ClusterView | None = None
        self.entity_configs: EntityConfigs | None = None
        quota_settings = QuotaSettings.from_config(config)
        self.quotas = QuotaManagers.from_settings(quota_settings)
        self.connection_quotas = ConnectionQuotas(
            connection_limits(config), quota_settings.client_window
        )
        self.acl_store: AclStore | None = None
        self.listener_security: dict[str, ListenerSecurity] = {}
        self.services: Services | None = None
        self.cluster_id: str | None = None
        self.servers: list[Acceptor] = []
        self.metrics: BrokerMetrics | None = None
        self.http_listeners: list[HttpListener] = []
        self.console: Console | None = None
        #: Where clients reach this broker, with the ports bound for port 0: set once ready.
        self.advertised: list[Listener] = []
        self.tasks: list[asyncio.Task] = []
        # topic -> (the broker config and overrides it was computed from, its LogConfig)
        self._log_configs: dict[str, tuple[BrokerConfig, dict[str, str], LogConfig]] = {}

    # -- lifecycle ---------------------------------------------------------

    async def start(self) -> None:
        started = time.monotonic()
        config = self.config
        self.store = open_metadata_store(config)
        await self.store.start()
        self.cluster = ClusterMetadata(self.store)
        await self.cluster.start()
        self.cluster_id = await self.cluster.ensure_cluster_id()
        self.view = ClusterView(self.broker_id, self.cluster_id, self.cluster)
        self.metrics = BrokerMetrics(self.view.topics)
        self.load_dynamic_config()
        await self.start_security()
        self.logs = LogManager(
            config.log_dirs(),
            broker_id=self.broker_id,
            cluster_id=self.cluster_id,
            config_for=self.log_config_for,
            producer_id_expiration_ms=config.get("producer.id.expiration.ms"),
            settings=LogManagerConfig.from_broker_config(config.get),
        )
        self.producer_ids = ProducerIdManager(self.store, self.broker_id)
        await self.producer_ids.reserve_through(self.logs.highest_producer_id())
        settings = ReplicationSettings.from_config(config)
        self.offline_replicas = OfflineReplicaQuery(
            self.replicas.inter_broker_address, settings.socket_timeout_ms / 1000
        )
        self.controller = Controller(
            self.broker_id, self.cluster, settings, self.unclean_allowed, self.offline_replicas
        )
        current_config = self.current_config
        self.topics = TopicManager(self.cluster, self.replicas, current_config)
        share_settings = ShareCoordinatorSettings.from_config(config)
        self.share_coordinator = ShareCoordinator(
            share_settings, self.cluster, self.replicas, self.topics
        )
        self.share_persister = DefaultStatePersister(
            self.broker_id,
            self.share_coordinator,
            self.replicas.inter_broker_address,
            share_settings,
        )
        self.coordinator = GroupCoordinator(
            CoordinatorSettings.from_config(config),
            self.cluster,
            self.replicas,
            self.topics,
            persister=self.share_persister,
        )
        markers = TxnMarkerWriter(self.replicas, self.coordinator)
        self.transactions = TransactionCoordinator(
            TransactionSettings.from_config(config),
            self.broker_id,
            self.cluster,
            self.replicas,
            self.topics,
            self.producer_ids,
            markers,
        )
        self.txn_verifier = PartitionVerifier(
            self.broker_id,
            self.transactions,
            self.replicas.inter_broker_address,
            VerifierSettings.from_config(config),
        )
        self.share_partitions = SharePartitionManager(
            self.replicas,
            self.share_persister,
            ShareSettingsCache(current_config, self.cluster.group_config),
            max_sessions=config.get_int("group.share.max.share.sessions"),
        )
        self.services = Services(
            replicas=self.replicas,
            topics=self.topics,
            groups=self.coordinator,
            cluster=self.view,
            logs=self.logs,
            controller=self.controller,
            producer_ids=self.producer_ids,
            transactions=self.transactions,
            txn_markers=markers,
            txn_verifier=self.txn_verifier,
            share_state=self.share_coordinator,
            config=current_config,
            metadata_answers=TopicAnswers(),
            entity_configs=self.entity_configs,
            quotas=self.quotas,
            share_partitions=self.share_partitions,
            authorizer=None if self.acl_store is None else self.acl_store.authorizer,
            acls=self.acl_store,
            topic_stats=self.metrics.topics,
            request_stats=self.metrics.requests,
        )
        max_request = config.get_int("socket.request.max.bytes")
        backlog = config.get_int("socket.listen.backlog.size")
        gate = ConnectionGate(self.connection_quotas, backlog)
        budget = RequestBudget(
            config.get_int("queued.max.requests"), config.get_int("queued.max.request.bytes")
        )
        ports = {}
        for listener in config.listeners():
            listener_settings = ListenerSettings(
                listener.name, max_request, self.listener_security[listener.name], gate, budget
            )
            server = await start_listener(
                self.services,
                self.connections,
                listener_settings,
                listener.host,
                listener.port,
                backlog,
                OPEN_FILES.give_way,
            )
            self.servers.append(server)
            ports[listener.name] = bound_port(server)
        advertised = self.advertised = config.advertised_listeners(bound_ports=ports)
        await register(
            self.cluster,
            self.broker_id,
            [Endpoint(a.name, a.host, a.port, a.security_protocol) for a in advertised],
            config.get("broker.rack"),
            wait_s=2 * config.get_int("zookeeper.session.timeout.ms") / 1000,
        )
        self.replicas.start(
            self.logs,
            self.cluster,
            self.log_config_for,
            settings,
            inter_broker_security(config),
        )
        self.cluster.add_listener(self.on_metadata_change)
        self.cluster.add_listener(self.controller.on_change)
        self.remove_stray_logs()
        for name in list(self.cluster.topics()):
            self.replicas.apply_topic(name)
        await self.replicas.wait_all_hosted(STARTUP_LOGS_WAIT_S)
        await self.controller.start()
        # Before the group coordinator: loading share groups may ask the persister.
        await self.share_coordinator.start()
        await self.coordinator.start()
        await self.transactions.start()
        for server in self.servers:
            await server.start_serving()
        await self.serve_metrics(config.get_list("metrics.listeners") or ())
        if config.get("console.enable"):
            await self.serve_console()
        self.start_task(
            close_idle_connections(self.connections, config.get("connections.max.idle.ms")),
            "idle-connections",
        )
        self.start_task(self.housekeeping(), "housekeeping")
        if self.logs.cleaner is not None:
            self.start_task(self.logs.cleaner.run(), "log-cleaner")
        self.start_task(self.controller.run(), "controller")
        if settings.auto_leader_rebalance:
            self.start_task(self.controller.run_rebalance(), "leader-rebalance")
        self.start_task(self.replicas.run_isr_expiration(), "isr-expiration")
        log.info(
            "Broker %d started in %.0f ms (cluster %s); ready, listening on %s",
            self.broker_id,
            (time.monotonic() - started) * 1000,
            self.cluster_id,
            ", ".join(f"{a.name}://{a.host}:{a.port}" for a in advertised),
        )

    async def stop(self) -> None:
        if self.console is not None:
            await self.console.close()
        for http_listener in self.http_listeners:
            await http_listener.close()
        for server in self.servers:
            server.close()
        for conn in list(self.connections):
            conn.close()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.txn_verifier is not None:
            self.txn_verifier.close()
        if self.transactions is not None:
            await self.transactions.stop()
        if self.share_partitions is not None:
            self.share_partitions.close()
        if self.share_persister is not None:
            self.share_persister.close()
        if self.share_coordinator is not None:
            await self.share_coordinator.stop()
        await self.replicas.stop()
        if self.offline_replicas is not None:
            self.offline_replicas.close()
        if self.coordinator is not None:
            await self.coordinator.stop()
        if self.logs is not None:
            self.logs.close()
        for security in self.listener_security.values():
            await security.close()
        if self.acl_store is not None:
            await self.acl_store.close()
        if self.entity_configs is not None:
            await self.entity_configs.close()
        if self.cluster is not None:
            await self.cluster.close()
        if self.store is not None:
            await self.store.close()

    async def serve_metrics(self, urls: Sequence[str]) -> None:
        """``metrics.listeners``: serve the counters and the state gauges to Prometheus.
        prometheus_client and aiohttp are imported only here, when they are asked for."""
        if not urls:
            return
        from kpybroker.metrics.registry import BrokerState, broker_registry
        from kpybroker.server.metrics_listener import start_metrics_listener

        state = BrokerState(
            hosted=self.replicas,
            controller=self.controller,
            topology=self.view,
            logs=self.logs,
            groups=self.coordinator,
            listeners=[listener.name for listener in self.config.listeners()],
            connections=self.connections,
            log_dirs=self.logs,
        )
        registry = broker_registry(self.metrics, state)
        for url in urls:
            self.http_listeners.append(await start_metrics_listener(registry, url))
        self.start_task(self.metrics.event_loop.run(), "event-loop-lag")

    async def serve_console(self) -> None:
        """``console.enable``: the web console, its latency chart fed by the request stats.
        aiohttp is imported only here, when it is asked for."""
        from kpybroker.console import ConsoleSettings, start_console

        assert self.services is not None and self.metrics is not None
        assert self.entity_configs is not None
        settings = ConsoleSettings.from_config(
            self.config, self.listener_security, credential_lookup(self.entity_configs.configs)
        )
        self.console = await start_console(self.services, settings, latency=self.metrics.requests)

    async def start_security(self) -> None:
        """Users' and clients' configs (quotas, SCRAM credentials), the ACLs, and each
        listener's TLS and SASL: all read before the first connection is accepted."""
        config = self.config
        self.entity_configs = EntityConfigs(self.store, self.on_entity_change)
        await self.entity_configs.start()
        for entity, _ in self.entity_configs:
            self.on_entity_change(entity)
        authorizer = configured_authorizer(
            config.get_str("authorizer.class.name") or "",
            {
                SUPER_USERS_CONFIG: config.get(SUPER_USERS_CONFIG),
                ALLOW_EVERYONE_IF_NO_ACL_FOUND_CONFIG: config.get(
                    ALLOW_EVERYONE_IF_NO_ACL_FOUND_CONFIG
                ),
            },
        )
        if authorizer is not None:
            self.acl_store = AclStore(self.store, authorizer)
            await self.acl_store.start()
        credentials = credential_lookup(self.entity_configs.configs)
        for listener in config.listeners():
            security = listener_security(config, listener, credentials)
            await security.start()
            self.listener_security[listener.name] = security

    def on_entity_change(self, entity: Entity) -> None:
        """A user's, client id's or address's configs changed: its quotas follow."""
        configs = self.entity_configs.configs(entity)
        if entity[0][0] == IP:
            address = entity[0][1]
            rate = configs.get(CONNECTION_CREATION_RATE)
            self.connection_quotas.update_ip_connection_rate(
                DEFAULT if address is None else address, None if rate is None else int(rate)
            )
            return
        try:
            self.quotas.update_entity(ClientQuotaEntity.of(entity), configs)
        except ValueError as exc:
            log.error("ignoring the stored quotas of %s: %s", entity, exc)

    def start_task(self, work: Coroutine[Any, Any, None], name: str) -> None:
        self.tasks.append(asyncio.create_task(work, name=name))

    async def housekeeping(self) -> None:
        """Checkpoints, flushes and retention at their configured intervals (LogManager
        decides); the long-lived heap frozen as partitions come and go."""
        heap = HeapFreezer()
        while True:
            await asyncio.sleep(HOUSEKEEPING_INTERVAL_S)
            try:
                for _ in self.logs.periodic_steps():
                    await asyncio.sleep(0)  # other clients are served between slices
                heap.settle(len(self.logs.logs))
            except Exception:
                log.exception("housekeeping failed; will retry")

    # -- topics and partitions ---------------------------------------------

    def current_config(self) -> BrokerConfig:
        """The broker config in force: dynamic changes replace ``self.config``."""
        return self.config

    def log_config_for(self, topic: str) -> LogConfig:
        """The topic's effective log config; computed again only when the broker config
        or the topic's overrides changed (creating 10,000 partitions asks 10,000 times)."""
        overrides = self.view.topic_overrides(topic)
        cached = self._log_configs.get(topic)
        if cached is not None and cached[0] is self.config and cached[1] == overrides:
            return cached[2]
        values = effective_topic_config(self.config, overrides)
        config = LogConfig.from_topic_config(values)
        self._log_configs[topic] = (self.config, overrides, config)
        return config

    def unclean_allowed(self, topic: str) -> bool:
        """``unclean.leader.election.enable`` for ``topic`` (a topic config; a broker default)."""
        return self.log_config_for(topic).unclean_leader_election_enable

    def remove_stray_logs(self) -> None:
        """Delete logs whose topic is gone from the metadata; set aside (``…-stray``, as
        Kafka 4 does) those recorded with another topic ID than the topic's."""
        topics = self.cluster.topics()
        for (name, index), plog in self.logs:
            meta = topics.get(name)
            if meta is None:
                log.warning("deleting stray log %s-%d: its topic no longer exists", name, index)
                self.logs.delete_partition(name, index)
            elif plog.topic_id and plog.topic_id != meta.topic_id.bytes:
                kept = self.logs.set_aside_stray(name, index)
                log.warning(
                    "%s-%d has another topic ID than %s's: kept in %s", name, index, name, kept
                )

    def on_metadata_change(self, change: MetadataChange) -> None:
        if change.kind is ChangeKind.TOPIC:
            self._log_configs.pop(change.name, None)
            self.replicas.apply_topic(change.name)
        elif change.kind is ChangeKind.PARTITION:
            self.replicas.apply_topic(change.name, change.partition)
        elif change.kind == ChangeKind.SESSION:
            self.replicas.set_fenced(self.cluster.session_lost)
        elif change.kind == ChangeKind.TOPIC_CONFIG:
            self.apply_topic_config(change.name)
        elif change.kind == ChangeKind.BROKER_CONFIG and change.name in (
            DEFAULT_BROKER_ENTITY,
            str(self.broker_id),
        ):
            self.load_dynamic_config()
            for name in list(self.cluster.topics()):
                self.apply_topic_config(name)

    def apply_topic_config(self, name: str) -> None:
        """Give the topic's logs and partitions its current effective config."""
        config = self.log_config_for(name)
        self.logs.update_config(name, config)
        self.replicas.apply_min_insync_replicas(name, config.min_insync_replicas)

    def load_dynamic_config(self) -> None:
        """Layer the dynamic broker configs of the metadata store over the static ones.

        Kafka keeps them in /config/brokers/<default> and /config/brokers/<id> and reads
        them at start and on every change; so do we. A stored set that this version
        refuses is logged and left out rather than stopping the broker, as in Kafka.
        """
        try:
            self.config = self.config.with_dynamic(
                dynamic_default=self.cluster.broker_config(None),
                dynamic_broker=self.cluster.broker_config(self.broker_id),
            )
        except ConfigError as exc:
            log.error("ignoring the stored dynamic broker configs: %s", exc.message)
