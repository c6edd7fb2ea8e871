"""The web console: a small read-only web UI served by the broker (``console.enable``).

It shows brokers and the controller, topics with their partitions, leaders, ISR,
offsets and sizes, consumer and share groups with members and lag, and live
throughput. Everything it shows or does goes through the Kafka API handlers, in
process (``kafka_calls``), so it sees what an admin client would see and changes
only what an admin client could, with Kafka's validation; when the listeners use SASL,
it asks its visitors for a user and password and acts as that user, under the ACLs
(``authentication``). docs/console.md says more.
"""

from kpybroker.console.app import Console, start_console
from kpybroker.console.settings import ConsoleSettings

__all__ = ["Console", "ConsoleSettings", "start_console"]
