"""The console's admin actions (``console.admin.enable``): create and delete a topic,
delete a group. Each is the Kafka request an admin client would send, answered by
the same handler, so Kafka's validation and error messages apply unchanged."""

from __future__ import annotations

from dataclasses import dataclass

from kpybroker.console.cluster_view import error_name
from kpybroker.console.kafka_calls import KafkaCalls
from kpybroker.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from kpybroker.protocol.messages.delete_groups import DeleteGroupsRequest
from kpybroker.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState

CREATE_TOPICS_VERSION = 7
DELETE_TOPICS_VERSION = 6
DELETE_GROUPS_VERSION = 3
#: How long CreateTopics and DeleteTopics wait for the change, as the admin tools' default.
TIMEOUT_MS = 30_000
#: The broker's defaults, as ``kafka-topics --create`` without the options.
DEFAULT = -1


@dataclass(frozen=True)
class Outcome:
    """What Kafka answered: no error, or its name and message."""

    error: str | None = None
    message: str | None = None

    def as_json(self) -> dict[str, str | None]:
        return {"error": self.error, "message": self.message}


async def create_topic(
    kafka: KafkaCalls, name: str, partitions: int = DEFAULT, replication_factor: int = DEFAULT
) -> Outcome:
    request = CreateTopicsRequest(
        topics=[
            CreatableTopic(
                name=name, num_partitions=partitions, replication_factor=replication_factor
            )
        ],
        timeout_ms=TIMEOUT_MS,
    )
    (result,) = (await kafka.call(request, CREATE_TOPICS_VERSION)).topics
    return Outcome(error_name(result.error_code), result.error_message)


async def delete_topic(kafka: KafkaCalls, name: str) -> Outcome:
    request = DeleteTopicsRequest(topics=[DeleteTopicState(name=name)], timeout_ms=TIMEOUT_MS)
    (result,) = (await kafka.call(request, DELETE_TOPICS_VERSION)).responses
    return Outcome(error_name(result.error_code), result.error_message)


async def delete_group(kafka: KafkaCalls, group_id: str) -> Outcome:
    request = DeleteGroupsRequest(groups_names=[group_id])
    (result,) = (await kafka.call(request, DELETE_GROUPS_VERSION)).results
    return Outcome(error_name(result.error_code), result.error_message)
