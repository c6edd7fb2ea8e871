"""KIP-932 share groups compared as whole responses: ShareGroupHeartbeat's error paths and a
member's life, ShareGroupDescribe, share sessions (ShareFetch, ShareAcknowledge) and their
errors, an acquire / accept / release / reject cycle, the share-group offset admin APIs,
ListGroups and DeleteGroups of share groups, the share coordinator's state APIs and
FindCoordinator's share key, and ApiVersions' share-related entries.

Member IDs are the probe's own (ShareGroupHeartbeat v1: the client makes them), so they and
the messages that quote them are the same on both brokers; topic IDs differ and are compared
by shape (``whole.py``), as are hosts. Kafka computes a share group's target assignment
asynchronously (every ``group.share.assignment.interval.ms``) and initializes its share
partitions through the share coordinator: scenarios heartbeat until the group has settled and
fetch until records are acquired, and observe the answer that settled, never a sleep.
Epochs a fenced member's message quotes are compared relative to the member's own epochs.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any

from kpybroker.protocol.messages import (
    alter_share_group_offsets,
    api_versions,
    consumer_group_describe,
    delete_groups,
    delete_share_group_offsets,
    delete_share_group_state,
    describe_groups,
    describe_share_group_offsets,
    find_coordinator,
    initialize_share_group_state,
    list_groups,
    read_share_group_state,
    read_share_group_state_summary,
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
    write_share_group_state,
)

from .consumer_groups import heartbeat as consumer_heartbeat
from .error_paths import UNKNOWN_ID, Topics, commit_request, ready_coordinator
from .probe import Probe, api_name, batch, error, scenario
from .scenarios import T0, alter_incrementally, group_config_value

#: The APIs ApiVersions is asked about: the share group ones (76-79, 90-92), the share
#: coordinator's (83-87), and those a share group's tools use beside them.
SHARE_KEYS = (10, 16, 42, 76, 77, 78, 79, 83, 84, 85, 86, 87, 90, 91, 92)
#: AcknowledgementBatch.AcknowledgeTypes (0 is a gap).
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
#: The first and the last session epochs (ShareFetch opens with 0, closes with -1).
OPEN, CLOSE = 0, -1
#: The share key type of FindCoordinator v6.
SHARE_KEY = 2
#: What a share coordinator answers while it is not ready for a key.
LOADING = ("COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR")
#: A record batch of ten records, the one a share consumer acquires whole.
TEN = 10


def member(name: str) -> str:
    """A fixed member ID of 22 characters, the length of the ones Kafka's clients make."""
    return f"diff-share-{name}".ljust(22, "0")[:22]


# -- ApiVersions -----------------------------------------------------------------------------


@scenario
def share_api_versions(p: Probe) -> None:
    """ApiVersions v3 and v4: the share APIs' ranges, and the share.version feature."""
    request = api_versions.ApiVersionsRequest(
        client_software_name="kpybroker-compat", client_software_version="1.0"
    )
    for v in (3, 4):
        answer = p.call(request, v)
        ranges = {k.api_key: f"{k.min_version}-{k.max_version}" for k in answer.api_keys}
        for key in SHARE_KEYS:
            p.see(f"v{v}/{api_name(key)}", ranges.get(key, "<absent>"))
        supported = {f.name: f"{f.min_version}-{f.max_version}" for f in answer.supported_features}
        finalized = {f.name: f.max_version_level for f in answer.finalized_features}
        p.see(f"v{v}/supported share.version", supported.get("share.version", "<absent>"))
        p.see(f"v{v}/finalized share.version", finalized.get("share.version", "<absent>"))


# -- ShareGroupHeartbeat ---------------------------------------------------------------------


def heartbeat(
    group: str, member_id: str, epoch: int = 0, topics: list[str] | None = None
) -> share_group_heartbeat.ShareGroupHeartbeatRequest:
    return share_group_heartbeat.ShareGroupHeartbeatRequest(
        group_id=group,
        member_id=member_id,
        member_epoch=epoch,
        rack_id=None,
        subscribed_topic_names=topics,
    )


class Member:
    """A share group member driven by hand: its epochs and the assignment it was last given."""

    def __init__(self, p: Probe, group: str, member_id: str, topics: list[str]) -> None:
        self.p, self.group, self.member_id, self.topics = p, group, member_id, topics
        self.epoch = 0
        #: Every epoch the coordinator answered, in order.
        self.epochs: list[int] = []
        self.assignment: list[Any] | None = None

    def request(self) -> Any:
        joining = self.epoch == 0
        return heartbeat(self.group, self.member_id, self.epoch, self.topics if joining else None)

    def heartbeat(self) -> Any:
        answer = self.p.call(self.request(), 1)
        self.took(answer)
        return answer

    def took(self, answer: Any) -> None:
        assert answer.error_code == 0, f"{self.p.name}: {answer}"
        if not self.epochs or self.epochs[-1] != answer.member_epoch:
            self.epochs.append(answer.member_epoch)
        self.epoch = answer.member_epoch
        if answer.assignment is not None:
            self.assignment = answer.assignment.topic_partitions

    def leave(self) -> Any:
        return self.p.call(heartbeat(self.group, self.member_id, -1), 1)


def describe_request(*groups: str, operations: bool = False) -> Any:
    return share_group_describe.ShareGroupDescribeRequest(
        group_ids=list(groups), include_authorized_operations=operations
    )


def settle(p: Probe, members: list[Member]) -> dict[str, Any]:
    """Heartbeat ``members`` until each has an assignment and all are at the group's
    assignment epoch (Kafka assigns asynchronously); each member's answer that brought its
    first non-empty assignment."""
    for m in members:
        if m.epoch == 0:
            m.heartbeat()
    brought: dict[str, Any] = {}

    def settled() -> Any:
        for m in members:
            answer = m.heartbeat()
            if (
                m.member_id not in brought
                and answer.assignment
                and answer.assignment.topic_partitions
            ):
                brought[m.member_id] = answer
        [group] = p.call(describe_request(members[0].group), 1).groups
        return group

    p.retry(
        settled,
        lambda g: (
            g.error_code == 0
            and g.group_epoch == g.assignment_epoch
            and all(m.assignment and m.epoch == g.assignment_epoch for m in members)
        ),
        f"share group {members[0].group} settling",
    )
    return brought


def relative(message: str | None, **epochs: int) -> str | None:
    """A fenced member's message with the epochs it quotes named: ``(current+10)``."""
    if not message:
        return message
    for name, value in epochs.items():
        message = message.replace(f"({value})", f"({name})")
    return message


def see_fenced(p: Probe, label: str, request: Any, **epochs: int) -> None:
    """A heartbeat answer, its message's epochs named (they differ by broker, see settle)."""
    answer = p.call(request, 1)
    answer.error_message = relative(answer.error_message, **epochs)
    p.see_whole(label, request, 1, answer)


def ready_groups(p: Probe, *groups: str) -> None:
    """Until each group's coordinator answers for it: FindCoordinator names it, and its
    ``__consumer_offsets`` partition is loaded (ShareGroupDescribe no longer answers a
    coordinator error)."""
    for group in groups:
        ready_coordinator(p, group)
        p.retry(
            lambda g=group: p.call(describe_request(g), 1).groups[0].error_code,
            lambda code: error(code) not in LOADING,
            f"the coordinator of {group}",
        )


def consumer_group(p: Probe, group: str, topic: str) -> None:
    """``group`` made a (KIP-848) consumer group with one member."""
    request = consumer_heartbeat(group, member("cg"), topics=[topic], owned=[])
    p.retry(lambda: p.call(request, 1).error_code, lambda code: code == 0, f"{group} joined")


def classic_group(p: Probe, group: str, topic: str) -> None:
    """``group`` made a classic group (Empty, committed offsets only)."""
    p.retry(
        lambda: p.call(commit_request(group, [(topic, 0, 1)]), 2).topics[0],
        lambda t: t.partitions[0].error_code == 0,
        f"a commit for {group}",
    )


@scenario
def share_group_heartbeat_error_paths(p: Probe) -> None:
    """ShareGroupHeartbeat refused before the group is looked at, and after: unknown groups
    and members, a consumer group's and a classic group's ID, a leave for no one."""
    topics = Topics(p)
    topics.create("diff-sh", 1)
    group = "diff-sh-errors"
    ready_groups(p, group, "diff-sh-never", "diff-sh-consumer", "diff-sh-classic")
    ready_groups(p, "diff-sh-no-topic")
    consumer_group(p, "diff-sh-consumer", "diff-sh")
    classic_group(p, "diff-sh-classic", "diff-sh")
    nobody = member("nobody")
    refused = {
        "empty group id": heartbeat("", member("a"), topics=["diff-sh"]),
        "empty member id": heartbeat(group, "", topics=["diff-sh"]),
        "blank member id": heartbeat(group, " ", topics=["diff-sh"]),
        "member id of 37 characters": heartbeat(group, "m" * 37, topics=["diff-sh"]),
        "null subscription on join": heartbeat(group, member("a")),
        "empty subscription on join": heartbeat(group, member("a"), topics=[]),
        "epoch -2": heartbeat(group, member("a"), -2, ["diff-sh"]),
        "unknown group, epoch 5": heartbeat("diff-sh-never", nobody, 5, ["diff-sh"]),
        "unknown group, epoch 5, no subscription": heartbeat("diff-sh-never", nobody, 5),
        "unknown group, leave": heartbeat("diff-sh-never", nobody, -1),
        "consumer group id": heartbeat("diff-sh-consumer", member("a"), topics=["diff-sh"]),
        "classic group id": heartbeat("diff-sh-classic", member("a"), topics=["diff-sh"]),
    }
    for label, request in refused.items():
        p.answer(label, request, 1)
    longest = "m" * 36
    p.answer("member id of 36 characters", heartbeat(group, longest, topics=["diff-sh"]), 1)
    p.answer("leave of the 36-character member", heartbeat(group, longest, -1), 1)
    # A subscription to a topic that does not exist is accepted: nothing to assign.
    lonely = heartbeat("diff-sh-no-topic", member("lonely"), topics=["diff-sh-missing"])
    p.answer("subscription to a missing topic", lonely, 1)
    p.answer("leave of the lonely member", heartbeat("diff-sh-no-topic", member("lonely"), -1), 1)


@scenario
def share_group_member_life(p: Probe) -> None:
    """A member joins (its assignment comes with a later heartbeat), is described, is fenced
    at epochs ahead and behind, rejoins, and leaves; the group is then described Empty."""
    topics = Topics(p)
    topics.create("diff-shl", 3)
    group = "diff-shl-group"
    ready_groups(p, group)
    a = Member(p, group, member("life-a"), ["diff-shl"])
    joined = p.answer("join", a.request(), 1)
    a.took(joined)
    brought = settle(p, [a])
    # The answer that brought the assignment: all three partitions, at the epoch the
    # coordinator reached (Kafka's depends on when its assignor ran).
    p.see_whole("assigned", a.request(), 1, brought[a.member_id], varies=("member_epoch",))
    p.answer("steady", a.request(), 1, varies=("member_epoch",))
    described = p.answer(
        "describe",
        describe_request(group, operations=True),
        1,
        varies=("*epoch", "*client_host"),
    )
    [d] = described.groups
    p.see(
        "describe/epochs: group, assignment and member at the member's",
        [d.group_epoch, d.assignment_epoch, d.members[0].member_epoch] == [a.epoch] * 3,
    )
    current, first = a.epoch, a.epochs[0]
    epochs = {"current": current, "current+10": current + 10}
    see_fenced(p, "epoch ahead", heartbeat(group, a.member_id, current + 10), **epochs)
    stranger = member("stranger")
    p.answer("unknown member, epoch 5", heartbeat(group, stranger, 5), 1)
    p.answer("unknown member, leave", heartbeat(group, stranger, -1), 1)
    p.see("epochs/join", first)
    p.see("epochs/settled above join", current > first)
    if len(a.epochs) >= 2:
        previous = a.epochs[-2]
        # The member's previous epoch is still accepted (its answer: the current one) ...
        answer = p.call(heartbeat(group, a.member_id, previous), 1)
        p.see(
            "previous epoch",
            [error(answer.error_code), answer.error_message, answer.member_epoch == current],
        )
        # ... an older one is fenced.
        older = {"current": current, "previous": previous, "previous-1": previous - 1}
        see_fenced(p, "epoch behind", heartbeat(group, a.member_id, previous - 1), **older)
    rejoin = heartbeat(group, a.member_id, 0, ["diff-shl"])
    answer = p.call(rejoin, 1)
    p.see("rejoin at epoch 0", [error(answer.error_code), answer.member_epoch == current])
    p.answer("leave", heartbeat(group, a.member_id, -1), 1)
    p.answer("leave again", heartbeat(group, a.member_id, -1), 1)
    after = p.answer("describe after leave", describe_request(group), 1, varies=("*epoch",))
    [d] = after.groups
    p.see(
        "describe after leave/epochs, past the member's last",
        [d.group_epoch - current, d.assignment_epoch - current],
    )


@scenario
def share_group_describe_error_paths(p: Probe) -> None:
    """ShareGroupDescribe of groups that are not share groups, and of several at once;
    ConsumerGroupDescribe and DescribeGroups of a share group."""
    topics = Topics(p)
    topics.create("diff-shd", 1)
    ready_groups(p, "diff-shd-share", "diff-shd-never", "diff-shd-consumer", "diff-shd-classic")
    consumer_group(p, "diff-shd-consumer", "diff-shd")
    classic_group(p, "diff-shd-classic", "diff-shd")
    share = Member(p, "diff-shd-share", member("describe"), ["diff-shd"])
    settle(p, [share])
    for label, groups in {
        "unknown": ["diff-shd-never"],
        "empty id": [""],
        "consumer group": ["diff-shd-consumer"],
        "classic group": ["diff-shd-classic"],
    }.items():
        p.answer(label, describe_request(*groups), 1)
    p.answer(
        "several",
        describe_request("diff-shd-never", "diff-shd-share", "diff-shd-consumer", ""),
        1,
        varies=("*epoch", "*client_host"),
        unordered=("groups",),  # Kafka answers shard by shard
    )
    described = consumer_group_describe.ConsumerGroupDescribeRequest(
        group_ids=["diff-shd-share"], include_authorized_operations=False
    )
    p.answer("ConsumerGroupDescribe of a share group", described, 1)
    classic = describe_groups.DescribeGroupsRequest(
        groups=["diff-shd-share"], include_authorized_operations=False
    )
    p.answer("DescribeGroups of a share group", classic, 5)
    share.leave()


# -- ShareFetch and ShareAcknowledge ---------------------------------------------------------


def ack_batches(cls: Any, acks: Iterable[tuple[int, int, list[int]]]) -> list[Any]:
    return [
        cls(first_offset=first, last_offset=last, acknowledge_types=types)
        for first, last, types in acks
    ]


def fetch_topic(
    topic_id: bytes, partition: int = 0, acks: Iterable[tuple[int, int, list[int]]] = ()
) -> share_fetch.FetchTopic:
    return share_fetch.FetchTopic(
        topic_id=topic_id,
        partitions=[
            share_fetch.FetchPartition(
                partition_index=partition,
                acknowledgement_batches=ack_batches(share_fetch.AcknowledgementBatch, acks),
            )
        ],
    )


def ack_topic(
    topic_id: bytes, partition: int, acks: Iterable[tuple[int, int, list[int]]]
) -> share_acknowledge.AcknowledgeTopic:
    return share_acknowledge.AcknowledgeTopic(
        topic_id=topic_id,
        partitions=[
            share_acknowledge.AcknowledgePartition(
                partition_index=partition,
                acknowledgement_batches=ack_batches(share_acknowledge.AcknowledgementBatch, acks),
            )
        ],
    )


def fetch_request(
    group: str | None,
    member_id: str | None,
    epoch: int,
    topics: list[Any],
    *,
    max_wait_ms: int = 100,
    max_records: int = 500,
    batch_size: int | None = None,
    renew: bool = False,
    record_limit: bool = False,
) -> share_fetch.ShareFetchRequest:
    return share_fetch.ShareFetchRequest(
        group_id=group,
        member_id=member_id,
        share_session_epoch=epoch,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=max_records,
        batch_size=max_records if batch_size is None else batch_size,
        share_acquire_mode=1 if record_limit else 0,
        is_renew_ack=renew,
        topics=topics,
        forgotten_topics_data=[],
    )


def ack_request(
    group: str | None, member_id: str | None, epoch: int, topics: list[Any]
) -> share_acknowledge.ShareAcknowledgeRequest:
    return share_acknowledge.ShareAcknowledgeRequest(
        group_id=group,
        member_id=member_id,
        share_session_epoch=epoch,
        is_renew_ack=False,
        topics=topics,
    )


def share_topic(p: Probe, topics: Topics, name: str, group: str, partitions: int = 1) -> None:
    """``name`` with ten records in one batch on partition 0, and ``group`` set to read it
    from the earliest offset (Kafka applies a group config through its metadata log: wait
    until it is described)."""
    topics.create(name, partitions)
    p.produce(name, 0, batch([b"%d" % i for i in range(TEN)], timestamp=T0))
    assert alter_incrementally(p, group, ("share.auto.offset.reset", 0, "earliest"))[0] == "NONE"
    p.retry(
        lambda: group_config_value(p, group, "share.auto.offset.reset"),
        lambda value: value == "earliest",
        "the share group's config",
    )


def lone_member(
    p: Probe, name: str, member_name: str, partitions: int = 1
) -> tuple[str, bytes, Member]:
    """A share group ``diff-<name>-group`` with one member, settled, reading ``diff-<name>``
    (``share_topic``): the group, the topic's ID and the member."""
    topics = Topics(p)
    group = f"diff-{name}-group"
    ready_groups(p, group)
    share_topic(p, topics, f"diff-{name}", group, partitions=partitions)
    a = Member(p, group, member(member_name), [f"diff-{name}"])
    settle(p, [a])
    return group, topics.id_of(f"diff-{name}"), a


def acquire(p: Probe, request: Any) -> Any:
    """A first fetch (epoch 0) repeated until it acquires records: Kafka initializes a share
    partition through its share coordinator after assigning it."""
    return p.retry(
        lambda: p.call(request, 2),
        lambda answer: (
            answer.error_code == 0
            and any(q.acquired_records for t in answer.responses for q in t.partitions)
        ),
        "records to acquire",
    )


@scenario
def share_session_error_paths(p: Probe) -> None:
    """ShareFetch and ShareAcknowledge refused as a whole (no session, wrong epochs, epoch 0
    with acknowledgements, no group, no member) and per partition (an unknown topic ID, a
    partition that does not exist), at both versions."""
    topics = Topics(p)
    group = "diff-shs-group"
    ready_groups(p, group, "diff-shs-never")
    share_topic(p, topics, "diff-shs", group)
    a = Member(p, group, member("session-a"), ["diff-shs"])
    settle(p, [a])
    tid = topics.id_of("diff-shs")
    me = a.member_id
    acks = [(0, 4, [ACCEPT])]
    for v in (1, 2):
        steps = {
            "no session": fetch_request(group, member(f"nosession{v}"), 5, [fetch_topic(tid)]),
            "epoch 0 with acknowledgements": fetch_request(
                group, me, OPEN, [fetch_topic(tid, 0, acks)]
            ),
            "null group": fetch_request(None, me, OPEN, [fetch_topic(tid)]),
            "empty member": fetch_request(group, "", OPEN, [fetch_topic(tid)]),
            "null member": fetch_request(group, None, OPEN, [fetch_topic(tid)]),
            "member id of 37 characters": fetch_request(group, "m" * 37, OPEN, [fetch_topic(tid)]),
        }
        for label, request in steps.items():
            p.answer(f"fetch v{v}/{label}", request, v)
        refused = {
            "no session": ack_request(group, member(f"nosession{v}"), 1, [ack_topic(tid, 0, acks)]),
            "epoch 0": ack_request(group, me, OPEN, [ack_topic(tid, 0, acks)]),
            "null group": ack_request(None, me, 1, []),
            "empty member": ack_request(group, "", 1, []),
            "null member": ack_request(group, None, 1, []),
            "member id of 37 characters": ack_request(group, "m" * 37, 1, []),
            "empty group": ack_request("", me, 1, []),
        }
        for label, request in refused.items():
            p.answer(f"acknowledge v{v}/{label}", request, v)

    # A group that does not exist, or whose ID is empty (Kafka takes it as any other): its
    # share partition has no state to start from.
    for label, other in (("unknown group", "diff-shs-never"), ("empty group", "")):
        nobody = member("nobody")
        p.answer(f"{label}/open", fetch_request(other, nobody, OPEN, [fetch_topic(tid)]), 2)
        p.answer(f"{label}/close", ack_request(other, nobody, CLOSE, []), 2)
    # A session on an unknown topic ID: its partition is answered so on every fetch.
    stray = member("stray")
    p.answer(
        "unknown topic id/open", fetch_request(group, stray, OPEN, [fetch_topic(UNKNOWN_ID)]), 2
    )
    p.answer("unknown topic id/epoch 1", fetch_request(group, stray, 1, []), 2)
    p.answer(
        "unknown topic id/acknowledge",
        ack_request(group, stray, 2, [ack_topic(UNKNOWN_ID, 0, [(0, 0, [ACCEPT])])]),
        2,
    )
    p.answer("unknown topic id/close", ack_request(group, stray, CLOSE, []), 2)
    p.answer("unknown topic id/after close", fetch_request(group, stray, 3, []), 2)
    # A partition the topic does not have.
    seven = member("seven")
    p.answer("unknown partition/open", fetch_request(group, seven, OPEN, [fetch_topic(tid, 7)]), 2)
    p.answer(
        "unknown partition/close", fetch_request(group, seven, CLOSE, [fetch_topic(tid, 7)]), 2
    )
    # Wrong session epochs: the session survives them.
    wrong = member("wrong")
    p.answer("wrong epoch/open", fetch_request(group, wrong, OPEN, [fetch_topic(UNKNOWN_ID)]), 2)
    p.answer("wrong epoch/fetch 2", fetch_request(group, wrong, 2, []), 2)
    p.answer("wrong epoch/acknowledge 3", ack_request(group, wrong, 3, []), 2)
    p.answer("wrong epoch/fetch 1", fetch_request(group, wrong, 1, []), 2)
    p.answer("wrong epoch/fetch 1 again", fetch_request(group, wrong, 1, []), 2)
    p.answer("wrong epoch/close", fetch_request(group, wrong, CLOSE, []), 2)
    a.leave()


@scenario
def share_fetch_acknowledge_cycle(p: Probe) -> None:
    """A member acquires a batch of ten records, accepts five, releases three (they come
    back, second delivery) and rejects two; acknowledgements of records it never acquired
    and malformed acknowledgement batches are refused per partition; ShareAcknowledge in
    the session, on a partition not in it, and closing it; the group's offsets after."""
    group, tid, a = lone_member(p, "shf", "cycle-a", partitions=2)
    me = a.member_id

    first = fetch_request(group, me, OPEN, [fetch_topic(tid)], max_wait_ms=1000)
    p.see_whole("acquire", first, 2, acquire(p, first))
    types = [ACCEPT] * 5 + [RELEASE] * 3 + [REJECT] * 2
    p.answer(
        "accept, release, reject",
        fetch_request(group, me, 1, [fetch_topic(tid, 0, [(0, 9, types)])], max_wait_ms=1000),
        2,
    )
    p.answer(
        "acknowledge offsets never acquired",
        fetch_request(group, me, 2, [fetch_topic(tid, 0, [(500, 510, [ACCEPT])])]),
        2,
    )
    p.answer(
        "acknowledge offsets already accepted",
        fetch_request(group, me, 3, [fetch_topic(tid, 0, [(0, 4, [ACCEPT])])]),
        2,
    )
    malformed = {
        "no such acknowledge type": [(5, 5, [9])],
        "types neither one nor one per offset": [(5, 7, [ACCEPT, ACCEPT])],
        "overlapping batches": [(5, 7, [ACCEPT]), (6, 7, [ACCEPT])],
        "first after last": [(7, 5, [ACCEPT])],
        "renew without is_renew_ack": [(5, 7, [RENEW])],
    }
    epoch = 4
    for label, batches in malformed.items():
        request = fetch_request(group, me, epoch, [fetch_topic(tid, 0, batches)])
        p.answer(f"malformed/{label}", request, 2)
        epoch += 1
    # Two batches may share an offset (Kafka checks only that they are in order), but the
    # second finds it acknowledged by the first: nothing of the request is applied.
    request = fetch_request(
        group, me, epoch, [fetch_topic(tid, 0, [(5, 6, [ACCEPT]), (6, 7, [ACCEPT])])]
    )
    p.answer("batches sharing an offset", request, 2)
    epoch += 1
    # ShareAcknowledge: the re-acquired records accepted; a partition of no session.
    request = ack_request(group, me, epoch, [ack_topic(tid, 0, [(5, 6, [ACCEPT])])])
    p.answer("acknowledge v2", request, 2)
    epoch += 1
    # Rejected records (past the start offset: 7 is still acquired) acknowledged again.
    request = ack_request(group, me, epoch, [ack_topic(tid, 0, [(8, 9, [ACCEPT])])])
    p.answer("acknowledge rejected records again", request, 2)
    epoch += 1
    p.answer(
        "acknowledge v1", ack_request(group, me, epoch, [ack_topic(tid, 0, [(7, 7, [ACCEPT])])]), 1
    )
    epoch += 1
    p.answer(
        "acknowledge a partition not in the session",
        ack_request(group, me, epoch, [ack_topic(tid, 1, [(0, 0, [ACCEPT])])]),
        2,
    )
    epoch += 1
    p.answer("acknowledge to close", ack_request(group, me, CLOSE, []), 2)
    p.answer("fetch after close", fetch_request(group, me, epoch, []), 2)
    p.answer(
        "offsets after",
        describe_offsets_request((group, None)),
        1,
    )
    a.leave()


@scenario
def share_acknowledge_refusals_worded(p: Probe) -> None:
    """Acknowledgements of records no longer acquired, worded after Kafka's in-flight
    batches: a batch released whole is refused as a batch (all of it, or part); once part
    of a batch is acknowledged apart, its records are refused one by one."""
    group, tid, a = lone_member(p, "shw", "worded-a")
    me = a.member_id
    first = fetch_request(group, me, OPEN, [fetch_topic(tid)], max_wait_ms=1000)
    p.see_whole("acquire", first, 2, acquire(p, first))
    steps = [
        ("release the batch whole", [(0, 9, [RELEASE])]),
        ("acknowledge it again", [(0, 9, [ACCEPT])]),
        ("acknowledge part of it", [(3, 4, [ACCEPT])]),
    ]
    epoch = 1
    for label, acks in steps:
        p.answer(label, ack_request(group, me, epoch, [ack_topic(tid, 0, acks)]), 2)
        epoch += 1
    again = fetch_request(group, me, epoch, [fetch_topic(tid)], max_wait_ms=1000)
    p.answer("acquire again", again, 2)
    epoch += 1
    steps = [
        ("accept the first half", [(0, 4, [ACCEPT])]),
        ("release the rest", [(5, 9, [RELEASE])]),
        ("acknowledge released records", [(5, 6, [ACCEPT])]),
    ]
    for label, acks in steps:
        p.answer(label, ack_request(group, me, epoch, [ack_topic(tid, 0, acks)]), 2)
        epoch += 1
    p.answer("acknowledge to close", ack_request(group, me, CLOSE, []), 2)
    a.leave()


@scenario
def share_fetch_record_limit_mode(p: Probe) -> None:
    """ShareFetch v2's record-limit mode (KIP-1206) on a batch of ten records: three at a
    time, the rest of the batch in flight but not acquired (an acknowledgement of it is
    refused record by record), then acquired by the next fetches."""
    group, tid, a = lone_member(p, "shr", "limit-a")
    me = a.member_id

    def fetch(epoch: int) -> Any:
        topic = [fetch_topic(tid)]
        return fetch_request(
            group, me, epoch, topic, max_wait_ms=1000, max_records=3, record_limit=True
        )

    p.see_whole("acquire three", fetch(OPEN), 2, acquire(p, fetch(OPEN)))
    refused = ack_request(group, me, 1, [ack_topic(tid, 0, [(4, 5, [ACCEPT])])])
    p.answer("acknowledge records in flight, not acquired", refused, 2)
    p.answer(
        "acknowledge past the batch",
        ack_request(group, me, 2, [ack_topic(tid, 0, [(9, 12, [ACCEPT])])]),
        2,
    )
    p.answer(
        "accept the three", ack_request(group, me, 3, [ack_topic(tid, 0, [(0, 2, [ACCEPT])])]), 2
    )
    p.answer("the next three", fetch(4), 2)
    p.answer("and the next", fetch(5), 2)
    p.answer("acknowledge to close", ack_request(group, me, CLOSE, []), 2)
    a.leave()


@scenario
def share_fetch_record_limit_reacquires(p: Probe) -> None:
    """Record-limit mode on records already in flight: five of a batch of ten acquired,
    released, then taken again two at a time (the limit cuts a re-acquisition), then the
    rest, with the two kinds of records in one fetch."""
    group, tid, a = lone_member(p, "shr2", "relimit-a")
    me = a.member_id

    def fetch(epoch: int, limit: int) -> Any:
        topic = [fetch_topic(tid)]
        return fetch_request(
            group, me, epoch, topic, max_wait_ms=1000, max_records=limit, record_limit=True
        )

    p.see_whole("acquire five", fetch(OPEN, 5), 2, acquire(p, fetch(OPEN, 5)))
    release = ack_request(group, me, 1, [ack_topic(tid, 0, [(0, 4, [RELEASE])])])
    p.answer("release the five", release, 2)
    p.answer("two of them again", fetch(2, 2), 2)
    p.answer("two more", fetch(3, 2), 2)
    p.answer("the last released one and new ones", fetch(4, 4), 2)
    p.answer(
        "acknowledge the first two",
        ack_request(group, me, 5, [ack_topic(tid, 0, [(0, 1, [ACCEPT])])]),
        2,
    )
    p.answer("the rest", fetch(6, 10), 2)
    p.answer("acknowledge to close", ack_request(group, me, CLOSE, []), 2)
    a.leave()


@scenario
def share_fetch_batch_size_below_one(p: Probe) -> None:
    """ShareFetch with a BatchSize of 0, then -1 (no client sends either): which
    acquired-record ranges it answers with."""
    group, tid, a = lone_member(p, "shb", "batch-a")
    me = a.member_id
    first = fetch_request(group, me, OPEN, [fetch_topic(tid)], max_wait_ms=1000, batch_size=0)
    p.see_whole("batch size 0", first, 2, acquire(p, first))
    release = ack_request(group, me, 1, [ack_topic(tid, 0, [(0, TEN - 1, [RELEASE])])])
    p.answer("release them", release, 2)
    again = fetch_request(group, me, 2, [fetch_topic(tid)], max_wait_ms=1000, batch_size=-1)
    p.answer("batch size -1", again, 2)
    p.answer("acknowledge to close", ack_request(group, me, CLOSE, []), 2)
    a.leave()


@scenario
def share_fetch_throttled_redelivery(p: Probe) -> None:
    """Ten records in one batch, released after every delivery (the group's delivery count
    limit is the default 5): from the third delivery on a fetch takes half of them, a
    record on its last attempt goes out alone, and one released on its last attempt is
    archived (Kafka 4.4's throttled redelivery, KAFKA-17541)."""
    group, tid, a = lone_member(p, "sht", "throttle-a")
    me = a.member_id
    first = fetch_request(group, me, OPEN, [fetch_topic(tid)], max_wait_ms=1000)
    answer = acquire(p, first)
    p.see_whole("delivery 1", first, 2, answer)
    epoch = 1
    for delivery in range(2, 9):
        held = [r for t in answer.responses for q in t.partitions for r in q.acquired_records]
        if not held:
            break
        released = [(r.first_offset, r.last_offset, [RELEASE]) for r in held]
        p.answer(
            f"release {delivery - 1}",
            ack_request(group, me, epoch, [ack_topic(tid, 0, released)]),
            2,
        )
        epoch += 1
        fetch = fetch_request(group, me, epoch, [fetch_topic(tid)], max_wait_ms=1000)
        answer = p.answer(f"delivery {delivery}", fetch, 2)
        epoch += 1
    p.answer("acknowledge to close", ack_request(group, me, CLOSE, []), 2)
    a.leave()


# -- Share group offsets, ListGroups, DeleteGroups ------------------------------------------


def describe_offsets_request(
    *groups: tuple[str, list[tuple[str, list[int]]] | None],
) -> describe_share_group_offsets.DescribeShareGroupOffsetsRequest:
    m = describe_share_group_offsets
    return m.DescribeShareGroupOffsetsRequest(
        groups=[
            m.DescribeShareGroupOffsetsRequestGroup(
                group_id=group,
                topics=None
                if asked is None
                else [
                    m.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
                    for t, ps in asked
                ],
            )
            for group, asked in groups
        ]
    )


def alter_offsets_request(
    group: str, offsets: list[tuple[str, int, int]]
) -> alter_share_group_offsets.AlterShareGroupOffsetsRequest:
    m = alter_share_group_offsets
    wanted: dict[str, list[Any]] = {}
    for topic, partition, offset in offsets:
        wanted.setdefault(topic, []).append(
            m.AlterShareGroupOffsetsRequestPartition(partition_index=partition, start_offset=offset)
        )
    return m.AlterShareGroupOffsetsRequest(
        group_id=group,
        topics=[
            m.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
            for t, ps in wanted.items()
        ],
    )


def delete_offsets_request(
    group: str, *names: str
) -> delete_share_group_offsets.DeleteShareGroupOffsetsRequest:
    m = delete_share_group_offsets
    return m.DeleteShareGroupOffsetsRequest(
        group_id=group,
        topics=[m.DeleteShareGroupOffsetsRequestTopic(topic_name=n) for n in names],
    )


def listed_share_groups(p: Probe, prefix: str, version: int, types: list[str]) -> Any:
    request = list_groups.ListGroupsRequest(states_filter=[], types_filter=types)
    answer = p.call(request, version)
    answer.groups = sorted(
        (g for g in answer.groups if g.group_id.startswith(prefix)), key=lambda g: g.group_id
    )
    return request, answer


@scenario
def share_group_offsets_error_paths(p: Probe) -> None:
    """DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets of groups
    that are not there, are not share groups, or still have a member; Alter creating a group;
    ListGroups by type, and DeleteGroups of share groups."""
    topics = Topics(p)
    group = "diff-sho-active"
    ready_groups(p, group, "diff-sho-never", "diff-sho-consumer", "diff-sho-created")
    share_topic(p, topics, "diff-sho", group)
    topics.create("diff-sho-other", 1)
    consumer_group(p, "diff-sho-consumer", "diff-sho")
    a = Member(p, group, member("offsets-a"), ["diff-sho"])
    settle(p, [a])

    for v in (0, 1):
        p.answer(
            f"describe v{v}/not share groups",
            describe_offsets_request(
                ("diff-sho-never", None), ("diff-sho-consumer", None), ("", None)
            ),
            v,
        )
        p.answer(
            f"describe v{v}/unknown group, named partitions",
            describe_offsets_request(
                ("diff-sho-never", [("diff-sho", [0]), ("diff-sho-missing", [0])])
            ),
            v,
        )
        p.answer(
            f"describe v{v}/no topics",
            describe_offsets_request(("diff-sho-never", [])),
            v,
        )

    p.answer("alter/active group", alter_offsets_request(group, [("diff-sho", 0, 0)]), 0)
    p.answer("delete/active group", delete_offsets_request(group, "diff-sho"), 0)
    p.answer(
        "alter/consumer group", alter_offsets_request("diff-sho-consumer", [("diff-sho", 0, 5)]), 0
    )
    p.answer("delete/consumer group", delete_offsets_request("diff-sho-consumer", "diff-sho"), 0)
    p.answer("delete/unknown group", delete_offsets_request("diff-sho-never", "diff-sho"), 0)

    # Altering a group that does not exist creates it, Empty.
    created = "diff-sho-created"
    p.answer(
        "alter/unknown group creates it", alter_offsets_request(created, [("diff-sho", 0, 4)]), 0
    )
    p.answer("alter/created, described", describe_request(created), 1)
    p.answer(
        "alter/created, offsets",
        describe_offsets_request((created, None)),
        1,
    )
    p.answer(
        "alter/unknown topic and partition",
        alter_offsets_request(created, [("diff-sho-missing", 0, 1), ("diff-sho", 9, 1)]),
        0,
    )
    p.answer("alter/past the end", alter_offsets_request(created, [("diff-sho", 0, 500)]), 0)
    p.answer("alter/past the end, offsets", describe_offsets_request((created, None)), 1)
    p.answer("alter/to -1", alter_offsets_request(created, [("diff-sho", 0, -1)]), 0)
    p.answer("alter/to -1, offsets", describe_offsets_request((created, None)), 1)
    p.answer(
        "delete/a topic the group has no offsets of",
        delete_offsets_request(created, "diff-sho-other"),
        0,
    )
    p.answer("delete/unknown topic", delete_offsets_request(created, "diff-sho-missing"), 0)
    p.answer("delete", delete_offsets_request(created, "diff-sho"), 0)
    p.answer("delete/offsets after", describe_offsets_request((created, None)), 1)

    # ListGroups by type: Kafka's reads committed coordinator state, a moment behind.
    settled = {"diff-sho-active": "Stable", "diff-sho-consumer": "Stable", created: "Empty"}
    p.retry(
        lambda: listed_share_groups(p, "diff-sho-", 4, [])[1].groups,
        lambda groups: {g.group_id: g.group_state for g in groups} == settled,
        "the groups listed",
    )
    for v, types in ((5, ["share"]), (5, ["Share"]), (5, ["consumer"]), (5, []), (4, [])):
        request, answer = listed_share_groups(p, "diff-sho-", v, types)
        p.see_whole(f"list v{v} {types}", request, v, answer)

    for v in (2, 3):
        deleted = delete_groups.DeleteGroupsRequest(groups_names=[group, "diff-sho-never"])
        p.answer(f"DeleteGroups v{v}/active share group", deleted, v, unordered=("results",))
    a.leave()
    p.answer(
        "DeleteGroups v3/empty share groups",
        delete_groups.DeleteGroupsRequest(groups_names=[created, group]),
        3,
        unordered=("results",),
    )
    p.answer("after DeleteGroups", describe_request(created, group), 1, unordered=("groups",))
    p.answer("offsets after DeleteGroups", describe_offsets_request((group, None)), 1)


# -- The share coordinator -------------------------------------------------------------------


def share_key(group: str, topic_id: bytes, partition: int) -> str:
    """A share coordinator key, as brokers make them: ``group:topicIdBase64:partition``."""
    text = base64.urlsafe_b64encode(topic_id).decode().rstrip("=")
    return f"{group}:{text}:{partition}"


@scenario
def share_state_answers(p: Probe) -> None:
    """FindCoordinator v6 with share keys, good and malformed; the share coordinator's
    state APIs (brokers' own: Initialize, Read, Write, Delete, ReadSummary) for a key with
    and without state, and degenerate requests."""
    topics = Topics(p)
    topics.create("diff-sst", 1)
    tid = topics.id_of("diff-sst")
    group = "diff-sst-group"
    key = share_key(group, tid, 0)
    ready = find_coordinator.FindCoordinatorRequest(key_type=SHARE_KEY, coordinator_keys=[key])
    # The first share key lookup creates __share_group_state: Kafka answers
    # COORDINATOR_NOT_AVAILABLE until it is loaded.
    p.retry(
        lambda: p.call(ready, 6).coordinators[0].error_code, lambda c: c == 0, "share coordinator"
    )
    tid_text = key.split(":")[1]

    def located(label: str, request: Any, version: int) -> None:
        # A share key holds the topic's ID, which differs by broker: compared as <topic id>.
        answer = p.call(request, version)
        for c in answer.coordinators:
            c.key = c.key.replace(tid_text, "<topic id>")
        p.see_whole(label, request, version, answer)

    located("FindCoordinator v6/share key", ready, 6)
    bad_keys = [group, f"{group}:nope:0", f":{tid_text}:0", f"{group}:{tid_text}:x"]
    located(
        "FindCoordinator v6/malformed share keys",
        find_coordinator.FindCoordinatorRequest(key_type=SHARE_KEY, coordinator_keys=bad_keys),
        6,
    )
    located(
        "FindCoordinator v5/share key",
        find_coordinator.FindCoordinatorRequest(key_type=SHARE_KEY, coordinator_keys=[key]),
        5,
    )
    located(
        "FindCoordinator v6/group key",
        find_coordinator.FindCoordinatorRequest(key_type=0, coordinator_keys=[group]),
        6,
    )

    def read(g: str = group, topic_id: bytes = tid, partition: int = 0) -> Any:
        m = read_share_group_state
        return m.ReadShareGroupStateRequest(
            group_id=g,
            topics=[
                m.ReadStateData(
                    topic_id=topic_id,
                    partitions=[m.PartitionData(partition=partition, leader_epoch=0)],
                )
            ],
        )

    def summary(g: str = group) -> Any:
        m = read_share_group_state_summary
        return m.ReadShareGroupStateSummaryRequest(
            group_id=g,
            topics=[
                m.ReadStateSummaryData(
                    topic_id=tid, partitions=[m.PartitionData(partition=0, leader_epoch=0)]
                )
            ],
        )

    def initialize(g: str = group, start: int = 3) -> Any:
        m = initialize_share_group_state
        return m.InitializeShareGroupStateRequest(
            group_id=g,
            topics=[
                m.InitializeStateData(
                    topic_id=tid,
                    partitions=[m.PartitionData(partition=0, state_epoch=1, start_offset=start)],
                )
            ],
        )

    def write(state_epoch: int = 1) -> Any:
        m = write_share_group_state
        return m.WriteShareGroupStateRequest(
            group_id=group,
            topics=[
                m.WriteStateData(
                    topic_id=tid,
                    partitions=[
                        m.PartitionData(
                            partition=0,
                            state_epoch=state_epoch,
                            leader_epoch=0,
                            start_offset=3,
                            delivery_complete_count=1,
                            state_batches=[
                                m.StateBatch(
                                    first_offset=3,
                                    last_offset=4,
                                    delivery_state=2,
                                    delivery_count=1,
                                )
                            ],
                        )
                    ],
                )
            ],
        )

    def delete(g: str = group) -> Any:
        m = delete_share_group_state
        return m.DeleteShareGroupStateRequest(
            group_id=g,
            topics=[m.DeleteStateData(topic_id=tid, partitions=[m.PartitionData(partition=0)])],
        )

    # Kafka loads each partition of __share_group_state on its own: until this key's is.
    p.retry(
        lambda: p.call(read(), 0).results[0].partitions[0].error_code,
        lambda code: error(code) not in LOADING,
        "the share coordinator's partition",
    )
    p.answer("read/no state", read(), 0)
    for v in (0, 1):
        p.answer(f"summary v{v}/no state", summary(), v)
    p.answer("write/no state", write(), 1)
    p.answer("delete/no state", delete(), 0)
    p.answer("initialize", initialize(), 0)
    p.answer("read/initialized", read(), 0)
    p.answer("write v1", write(), 1)
    p.answer("write v0", write(), 0)
    p.answer("write/old state epoch", write(0), 1)
    p.answer("read/written", read(), 0)
    for v in (0, 1):
        p.answer(f"summary v{v}/written", summary(), v)
    p.answer("initialize/again", initialize(start=7), 0)
    p.answer("delete", delete(), 0)
    p.answer("read/deleted", read(), 0)
    for label, request in {
        "read/empty group id": read(""),
        "initialize/empty group id": initialize(""),
        "delete/empty group id": delete(""),
        "summary/empty group id": summary(""),
    }.items():
        p.answer(label, request, 0)
