"""Every topic config, one entry each, with the broker configs that supply its default.

The set, types, defaults, valid values and synonyms are Kafka 4.4's (``LogConfig`` and
``ServerTopicConfigSynonyms``; 4.4.0 added errors.deadletterqueue.group.enable,
max.decompressed.message.bytes and remote.copy.lag.*): message.format.version,
message.timestamp.difference.max.ms and message.downconversion.enable are gone since 4.0, so a
topic that names them is refused as Kafka refuses it. ``synonyms`` lists the broker configs
whose value becomes the topic's default, the first one set winning, so DescribeConfigs can
report synonyms and sources.
Topic configs can always be altered (``mode=PER_TOPIC``).

A config the log acts on also has a ``LogConfig`` field (kpybroker/log/log_config.py) that names it
and repeats its default, since the log layer cannot import this one;
tests/unit/test_config_sources.py fails when the two differ.
"""

from kpybroker.config.core import (
    GZIP_LEVEL,
    LONG_MAX,
    THROTTLED_REPLICAS,
    ConfigKey,
    ConfigType,
    EachOneOf,
    Importance,
    OneOf,
    Range,
    UpdateMode,
    index_keys,
)
from kpybroker.log.log_config import CREATE_TIME, LOG_APPEND_TIME

BOOLEAN, STRING, INT, LONG = ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.LONG
DOUBLE, LIST = ConfigType.DOUBLE, ConfigType.LIST
MEDIUM = Importance.MEDIUM
PER_TOPIC = UpdateMode.PER_TOPIC

# fmt: off
TOPIC_CONFIGS: dict[str, ConfigKey] = index_keys([
    # --- Segments and indexes ---------------------------------------------------------------------
    ConfigKey("segment.bytes", INT, 1_073_741_824, MEDIUM, valid=Range(14), mode=PER_TOPIC,
              enforced=True, synonyms=("log.segment.bytes",),
              doc="Largest size of one segment file; the active segment is rolled before it "
                  "would grow past it."),
    ConfigKey("segment.ms", LONG, 604_800_000, MEDIUM, valid=Range(1), mode=PER_TOPIC,
              enforced=True, synonyms=("log.roll.ms", "log.roll.hours"),
              doc="Longest time before the active segment is rolled, so that retention and "
                  "compaction can act on it even when little is written."),
    ConfigKey("segment.jitter.ms", LONG, 0, MEDIUM, valid=Range(0), mode=PER_TOPIC, enforced=True,
              synonyms=("log.roll.jitter.ms", "log.roll.jitter.hours"),
              doc="Most random time taken off segment.ms so that segments do not all roll at "
                  "once."),
    ConfigKey("segment.index.bytes", INT, 10_485_760, MEDIUM, valid=Range(4), mode=PER_TOPIC,
              enforced=True, synonyms=("log.index.size.max.bytes",),
              doc="Largest size of the offset and time indexes of one segment; a full index "
                  "rolls the segment."),
    ConfigKey("index.interval.bytes", INT, 4096, MEDIUM, valid=Range(0), mode=PER_TOPIC,
              enforced=True, synonyms=("log.index.interval.bytes",),
              doc="Bytes of batches between two offset index entries; smaller means finer seeks "
                  "and bigger indexes."),
    ConfigKey("preallocate", BOOLEAN, False, MEDIUM, mode=PER_TOPIC, synonyms=("log.preallocate",),
              doc="Create segment files at their full size up front."),
    ConfigKey("file.delete.delay.ms", LONG, 60_000, MEDIUM, valid=Range(0), mode=PER_TOPIC,
              enforced=True, synonyms=("log.segment.delete.delay.ms",),
              doc="How long a segment that is no longer needed stays on disk before it is "
                  "removed."),

    # --- Retention --------------------------------------------------------------------------------
    ConfigKey("retention.ms", LONG, 604_800_000, MEDIUM, valid=Range(-1), mode=PER_TOPIC,
              enforced=True,
              synonyms=("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
              doc="How long data is kept before old segments may be deleted "
                  "(cleanup.policy=delete); -1 keeps data forever."),
    ConfigKey("retention.bytes", LONG, -1, MEDIUM, mode=PER_TOPIC, enforced=True,
              synonyms=("log.retention.bytes",),
              doc="Largest size a partition may reach before old segments are deleted "
                  "(cleanup.policy=delete); -1 is no limit."),
    ConfigKey("cleanup.policy", LIST, ("delete",), MEDIUM, valid=EachOneOf("compact", "delete"),
              mode=PER_TOPIC, enforced=True, synonyms=("log.cleanup.policy",),
              doc="What happens to old segments: delete, compact (keep the latest record per "
                  "key), or both, comma separated."),
    ConfigKey("local.retention.ms", LONG, -2, MEDIUM, valid=Range(-2), mode=PER_TOPIC,
              synonyms=("log.local.retention.ms",),
              doc="With tiered storage, how long data stays on local disk; -2 means "
                  "retention.ms."),
    ConfigKey("local.retention.bytes", LONG, -2, MEDIUM, valid=Range(-2), mode=PER_TOPIC,
              synonyms=("log.local.retention.bytes",),
              doc="With tiered storage, how much data stays on local disk per partition; -2 "
                  "means retention.bytes."),
    ConfigKey("remote.storage.enable", BOOLEAN, False, MEDIUM, mode=PER_TOPIC, enforced=True,
              doc="Move old segments to tiered storage. kpybroker has no tiered storage, so true "
                  "is refused."),
    ConfigKey("remote.log.copy.disable", BOOLEAN, False, MEDIUM, mode=PER_TOPIC,
              doc="With tiered storage, stop copying new segments to remote storage while "
                  "keeping what is there."),
    ConfigKey("remote.log.delete.on.disable", BOOLEAN, False, MEDIUM, mode=PER_TOPIC,
              doc="With tiered storage, delete remote data when remote.storage.enable is turned "
                  "off."),
    ConfigKey("remote.copy.lag.ms", LONG, 0, MEDIUM, valid=Range(-1), mode=PER_TOPIC,
              synonyms=("log.remote.copy.lag.ms",),
              doc="With tiered storage, how old a closed segment's newest record must be before "
                  "the segment may be copied to remote storage (either this or "
                  "remote.copy.lag.bytes suffices); 0 copies at once, -1 means "
                  "local.retention.ms."),
    ConfigKey("remote.copy.lag.bytes", LONG, -1, MEDIUM, valid=Range(-1), mode=PER_TOPIC,
              synonyms=("log.remote.copy.lag.bytes",),
              doc="With tiered storage, how many bytes of newer local data must follow a closed "
                  "segment before it may be copied to remote storage (either this or "
                  "remote.copy.lag.ms suffices); 0 copies at once, -1 means "
                  "local.retention.bytes."),

    # --- Compaction -------------------------------------------------------------------------------
    ConfigKey("min.cleanable.dirty.ratio", DOUBLE, 0.5, MEDIUM, valid=Range(0, 1), mode=PER_TOPIC,
              enforced=True, synonyms=("log.cleaner.min.cleanable.ratio",),
              doc="Dirty share of a compacted log that makes it eligible for cleaning."),
    ConfigKey("min.compaction.lag.ms", LONG, 0, MEDIUM, valid=Range(0), mode=PER_TOPIC,
              enforced=True, synonyms=("log.cleaner.min.compaction.lag.ms",),
              doc="Records younger than this are never compacted."),
    ConfigKey("max.compaction.lag.ms", LONG, LONG_MAX, MEDIUM, valid=Range(1), mode=PER_TOPIC,
              enforced=True, synonyms=("log.cleaner.max.compaction.lag.ms",),
              doc="Records older than this become eligible for compaction even below the dirty "
                  "ratio."),
    ConfigKey("delete.retention.ms", LONG, 86_400_000, MEDIUM, valid=Range(0), mode=PER_TOPIC,
              enforced=True, synonyms=("log.cleaner.delete.retention.ms",),
              doc="How long tombstones (and transaction markers) of a compacted topic are kept, "
                  "which bounds how long a consumer reading from the start may take."),

    # --- Messages ---------------------------------------------------------------------------------
    ConfigKey("max.message.bytes", INT, 1_048_588, MEDIUM, valid=Range(0), mode=PER_TOPIC,
              enforced=True, synonyms=("message.max.bytes",),
              doc="Largest record batch accepted for this topic, after compression."),
    ConfigKey("max.decompressed.message.bytes", INT, 2_147_483_639, MEDIUM,
              valid=Range(1, 2_147_483_639), mode=PER_TOPIC, enforced=True,
              synonyms=("max.decompressed.message.bytes",),
              doc="Largest size of a single record once decompressed; a compressed batch "
                  "holding a larger record is refused (INVALID_RECORD). Kafka also applies it "
                  "where compaction and offset lookups by time decompress; kpybroker checks it "
                  "on produce only. The default sets no limit."),
    ConfigKey("errors.deadletterqueue.group.enable", BOOLEAN, False, MEDIUM, mode=PER_TOPIC,
              doc="Let share groups use this topic as their dead-letter queue (KIP-1191). "
                  "kpybroker has no share groups."),
    ConfigKey("compression.type", STRING, "producer", MEDIUM,
              valid=OneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
              mode=PER_TOPIC, enforced=True, synonyms=("compression.type",),
              doc="Compression of stored batches: producer (keep what the producer sent), "
                  "uncompressed, gzip, snappy, lz4 or zstd."),
    ConfigKey("compression.gzip.level", INT, -1, MEDIUM, valid=GZIP_LEVEL, mode=PER_TOPIC,
              synonyms=("compression.gzip.level",),
              doc="gzip level used when the broker compresses."),
    ConfigKey("compression.lz4.level", INT, 9, MEDIUM, valid=Range(1, 17), mode=PER_TOPIC,
              synonyms=("compression.lz4.level",),
              doc="lz4 level used when the broker compresses."),
    ConfigKey("compression.zstd.level", INT, 3, MEDIUM, valid=Range(-131_072, 22), mode=PER_TOPIC,
              synonyms=("compression.zstd.level",),
              doc="zstd level used when the broker compresses."),
    ConfigKey("message.timestamp.type", STRING, CREATE_TIME, MEDIUM,
              valid=OneOf(CREATE_TIME, LOG_APPEND_TIME), mode=PER_TOPIC, enforced=True,
              synonyms=("log.message.timestamp.type",),
              doc="Timestamp stored in batches: the producer's CreateTime or the broker's "
                  "LogAppendTime."),
    ConfigKey("message.timestamp.before.max.ms", LONG, LONG_MAX, MEDIUM, valid=Range(0),
              mode=PER_TOPIC, enforced=True, synonyms=("log.message.timestamp.before.max.ms",),
              doc="With CreateTime, reject batches whose timestamp is more than this far in the "
                  "past."),
    ConfigKey("message.timestamp.after.max.ms", LONG, 3_600_000, MEDIUM, valid=Range(0),
              mode=PER_TOPIC, enforced=True, synonyms=("log.message.timestamp.after.max.ms",),
              doc="With CreateTime, reject batches whose timestamp is more than this far in the "
                  "future."),

    # --- Durability and flushing ------------------------------------------------------------------
    ConfigKey("flush.messages", LONG, LONG_MAX, MEDIUM, valid=Range(1), mode=PER_TOPIC,
              enforced=True, synonyms=("log.flush.interval.messages",),
              doc="Records appended before the partition is fsynced. By default durability comes "
                  "from replication and the OS, not from fsync."),
    ConfigKey("flush.ms", LONG, LONG_MAX, MEDIUM, valid=Range(0), mode=PER_TOPIC, enforced=True,
              synonyms=("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
              doc="Longest time appended data waits before it is fsynced."),
    ConfigKey("min.insync.replicas", INT, 1, MEDIUM, valid=Range(1), mode=PER_TOPIC, enforced=True,
              synonyms=("min.insync.replicas",),
              doc="With acks=all, how many in-sync replicas must have a write before it is "
                  "acknowledged."),
    ConfigKey("unclean.leader.election.enable", BOOLEAN, False, MEDIUM, mode=PER_TOPIC,
              enforced=True,
              synonyms=("unclean.leader.election.enable",),
              doc="Let an out-of-sync replica become leader when no in-sync one is left, at the "
                  "price of losing data."),

    # --- Replication throttling -------------------------------------------------------------------
    ConfigKey("leader.replication.throttled.replicas", LIST, (), MEDIUM, valid=THROTTLED_REPLICAS,
              mode=PER_TOPIC,
              doc="Replicas whose leader-side replication is throttled: partition:broker pairs, "
                  "or * for all."),
    ConfigKey("follower.replication.throttled.replicas", LIST, (), MEDIUM, valid=THROTTLED_REPLICAS,
              mode=PER_TOPIC,
              doc="Replicas whose follower-side replication is throttled: partition:broker "
                  "pairs, or * for all."),
])
# fmt: on
