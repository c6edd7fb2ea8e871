// KafkaJS against the broker under test: admin, producers, a consumer group, commits.
//
// KafkaJS never uses flexible versions (Metadata <= 6, Produce <= 7,
// Fetch <= 11, JoinGroup <= 5, OffsetCommit <= 5 ...) and ignores the
// broker's advertised minimums, so it covers the old non-flexible encodings
// that the Java and librdkafka clients no longer send.
//
// Run by compat-tests/run (suite "kafkajs") with node's own test runner;
// COMPAT_BOOTSTRAP names the broker (its PLAINTEXT listener), COMPAT_SECURITY
// its SASL and TLS listeners, users and CA (compat/security.py), and
// COMPAT_NODE_MODULES the npm ci tree.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { randomUUID } from 'node:crypto';

const require = createRequire(`${process.env.COMPAT_NODE_MODULES}/`);
const {
  Kafka,
  CompressionTypes,
  Partitioners,
  logLevel,
  AclResourceTypes,
  AclOperationTypes,
  AclPermissionTypes,
  ResourcePatternTypes,
} = require('kafkajs');

const bootstrap = process.env.COMPAT_BOOTSTRAP;
assert.ok(bootstrap, 'COMPAT_BOOTSTRAP is not set: run this through compat-tests/run');
assert.ok(process.env.COMPAT_SECURITY, 'COMPAT_SECURITY is not set: the suite needs a secured broker');
const security = JSON.parse(process.env.COMPAT_SECURITY);

const CLIENT = {
  logLevel: logLevel.ERROR,
  retry: { retries: 5, initialRetryTime: 100 },
};
const kafka = new Kafka({
  ...CLIENT,
  clientId: 'compat-kafkajs',
  brokers: [bootstrap], // 127.0.0.1:PORT: node 20 may resolve localhost to ::1
});

/** A client logging in as `user` with SASL `mechanism` on `listener`, trusting the CA over TLS. */
function secured(listener, mechanism, user) {
  return new Kafka({
    ...CLIENT,
    clientId: `compat-kafkajs-${user}`,
    brokers: [security.listeners[listener]],
    ssl: listener === 'SASL_SSL' ? { ca: [readFileSync(security.ca_pem, 'utf8')] } : false,
    sasl: { mechanism: mechanism.toLowerCase(), username: user, password: security.users[user] },
  });
}
const TIMEOUT = { timeout: 60_000 };
const unique = (stem) => `${stem}-${randomUUID().slice(0, 8)}`;

/** Wait until `predicate()` is true, polling; fails after `ms`. */
async function until(predicate, ms, what) {
  const deadline = Date.now() + ms;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Consume `topic` in `groupId` until `count` messages arrived; returns them, then leaves. */
async function consumeInGroup(groupId, topic, count, options = {}, client = kafka) {
  // A short long-poll: disconnect() waits for the fetch in flight.
  const consumer = client.consumer({ groupId, heartbeatInterval: 500, maxWaitTimeInMs: 300, ...options });
  const seen = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({
      autoCommit: options.autoCommit ?? true,
      eachMessage: async ({ partition, message }) => {
        seen.push({ partition, offset: Number(message.offset), value: message.value.toString() });
      },
    });
    await until(() => seen.length >= count, 45_000, `${count} messages in group ${groupId}`);
    // Anything beyond `count` would show up within a moment.
    await new Promise((resolve) => setTimeout(resolve, 300));
    return { consumer, seen };
  } finally {
    if (options.keep !== true) await consumer.disconnect();
  }
}

describe('kafkajs', () => {
  const admin = kafka.admin();
  const topic = unique('kafkajs-main');

  before(async () => {
    await admin.connect();
  });
  after(async () => {
    await admin.disconnect();
  });

  test('admin creates a topic with a config and waits for its leaders', TIMEOUT, async () => {
    const created = await admin.createTopics({
      topics: [
        {
          topic,
          numPartitions: 3,
          replicationFactor: 1,
          configEntries: [{ name: 'retention.ms', value: '3600000' }],
        },
      ],
      waitForLeaders: true,
    });
    assert.equal(created, true);
    const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
    assert.equal(topics.length, 1);
    assert.deepEqual(
      topics[0].partitions.map((p) => p.partitionId).sort(),
      [0, 1, 2],
    );
    for (const p of topics[0].partitions) {
      assert.equal(p.partitionErrorCode, 0);
      assert.deepEqual(p.replicas, [p.leader]);
      assert.deepEqual(p.isr, [p.leader]);
    }
    assert.ok((await admin.listTopics()).includes(topic));
    const again = await admin.createTopics({ topics: [{ topic, numPartitions: 1 }] });
    assert.equal(again, false, 'creating an existing topic reports false');
  });

  test('producer sends keyed gzip batches with acks=-1', TIMEOUT, async () => {
    const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
    await producer.connect();
    try {
      const messages = Array.from({ length: 300 }, (_, i) => ({
        partition: i % 3,
        key: `key-${i}`,
        value: `value-${i}`,
        headers: { source: 'kafkajs', index: String(i) },
      }));
      const results = await producer.send({
        topic,
        acks: -1,
        compression: CompressionTypes.GZIP,
        messages,
      });
      assert.deepEqual(
        results.map((r) => [r.partition, r.errorCode, r.baseOffset]).sort(),
        [
          [0, 0, '0'],
          [1, 0, '0'],
          [2, 0, '0'],
        ],
      );
    } finally {
      await producer.disconnect();
    }
    const offsets = await admin.fetchTopicOffsets(topic);
    assert.deepEqual(
      offsets.map((o) => [o.partition, o.low, o.high]).sort(),
      [
        [0, '0', '100'],
        [1, '0', '100'],
        [2, '0', '100'],
      ],
    );
  });

  test('idempotent producer (one in flight) appends every message once', TIMEOUT, async () => {
    const producer = kafka.producer({
      idempotent: true,
      maxInFlightRequests: 1,
      createPartitioner: Partitioners.DefaultPartitioner,
    });
    await producer.connect();
    try {
      for (let round = 0; round < 5; round++) {
        const messages = Array.from({ length: 30 }, (_, i) => ({
          partition: 0,
          value: `idem-${round}-${i}`,
        }));
        const [result] = await producer.send({ topic, acks: -1, messages });
        assert.equal(result.baseOffset, String(100 + round * 30));
      }
    } finally {
      await producer.disconnect();
    }
    const offsets = await admin.fetchTopicOffsets(topic);
    assert.equal(offsets.find((o) => o.partition === 0).high, '250');
  });

  test('a consumer group reads every message once and commits the end', TIMEOUT, async () => {
    const groupId = unique('kafkajs-group');
    const { seen } = await consumeInGroup(groupId, topic, 450);
    assert.equal(seen.length, 450, 'no message twice');
    const keys = new Set(seen.map((m) => `${m.partition}:${m.offset}`));
    assert.equal(keys.size, 450);
    const committed = await admin.fetchOffsets({ groupId, topics: [topic] });
    assert.deepEqual(
      committed[0].partitions.map((p) => [p.partition, p.offset]).sort(),
      [
        [0, '250'],
        [1, '100'],
        [2, '100'],
      ],
    );
    const described = await admin.describeGroups([groupId]);
    assert.equal(described.groups[0].state, 'Empty');
    assert.equal(described.groups[0].protocolType, 'consumer');
    const listed = await admin.listGroups();
    assert.ok(listed.groups.some((g) => g.groupId === groupId));
  });

  test('manual commitOffsets, then a new member resumes from the commit', TIMEOUT, async () => {
    const groupId = unique('kafkajs-manual');
    const first = await consumeInGroup(groupId, topic, 450, { autoCommit: false, keep: true });
    try {
      await first.consumer.commitOffsets([
        { topic, partition: 0, offset: '240' },
        { topic, partition: 1, offset: '100' },
        { topic, partition: 2, offset: '95' },
      ]);
    } finally {
      await first.consumer.disconnect();
    }
    const committed = await admin.fetchOffsets({ groupId, topics: [topic] });
    assert.deepEqual(
      committed[0].partitions.map((p) => [p.partition, p.offset]).sort(),
      [
        [0, '240'],
        [1, '100'],
        [2, '95'],
      ],
    );
    const { seen } = await consumeInGroup(groupId, topic, 15);
    assert.deepEqual(
      seen.map((m) => `${m.partition}:${m.offset}`).sort(),
      [
        ...Array.from({ length: 10 }, (_, i) => `0:${240 + i}`),
        ...Array.from({ length: 5 }, (_, i) => `2:${95 + i}`),
      ].sort(),
    );
  });

  test('a transaction commits records and offsets; an aborted one stays invisible', TIMEOUT, async () => {
    const txnTopic = unique('kafkajs-txn');
    const offsetsGroup = unique('kafkajs-txn-offsets');
    await admin.createTopics({ topics: [{ topic: txnTopic, numPartitions: 2 }], waitForLeaders: true });
    const producer = kafka.producer({
      transactionalId: unique('kafkajs-txn-id'),
      idempotent: true,
      maxInFlightRequests: 1,
    });
    await producer.connect();
    try {
      const committed = await producer.transaction();
      await committed.send({
        topic: txnTopic,
        messages: Array.from({ length: 8 }, (_, i) => ({ partition: i % 2, value: `committed-${i}` })),
      });
      await committed.sendOffsets({
        consumerGroupId: offsetsGroup,
        topics: [{ topic: txnTopic, partitions: [{ partition: 0, offset: '3' }] }],
      });
      await committed.commit();
      const aborted = await producer.transaction();
      await aborted.send({ topic: txnTopic, messages: [{ partition: 0, value: 'aborted' }] });
      await aborted.abort();
    } finally {
      await producer.disconnect();
    }
    // KafkaJS consumers read committed records only unless readUncommitted is set.
    const { seen } = await consumeInGroup(unique('kafkajs-txn-reader'), txnTopic, 8);
    assert.deepEqual(
      seen.map((m) => m.value).sort(),
      Array.from({ length: 8 }, (_, i) => `committed-${i}`).sort(),
    );
    const offsets = await admin.fetchOffsets({ groupId: offsetsGroup, topics: [txnTopic] });
    assert.equal(offsets[0].partitions.find((p) => p.partition === 0).offset, '3');
  });

  test('admin seeks a group, finds offsets by timestamp, and deletes', TIMEOUT, async () => {
    const groupId = unique('kafkajs-admin');
    await consumeInGroup(groupId, topic, 450);
    await admin.setOffsets({ groupId, topic, partitions: [{ partition: 1, offset: '7' }] });
    const moved = await admin.fetchOffsets({ groupId, topics: [topic] });
    assert.equal(moved[0].partitions.find((p) => p.partition === 1).offset, '7');

    const byTime = await admin.fetchTopicOffsetsByTimestamp(topic, Date.now() - 3_600_000);
    assert.deepEqual(
      byTime.map((o) => [o.partition, o.offset]).sort(),
      [
        [0, '0'],
        [1, '0'],
        [2, '0'],
      ],
    );
    await admin.deleteGroups([groupId]);
    const gone = await admin.describeGroups([groupId]);
    assert.equal(gone.groups[0].state, 'Dead');

    await admin.deleteTopics({ topics: [topic] });
    await until(async () => !(await admin.listTopics()).includes(topic), 20_000, 'topic deletion');
  });
});

/** ALLOW `operation` on a resource to User:alice, as KafkaJS's createAcls takes it. */
const allowAlice = (resourceType, resourceName, operation) => ({
  resourceType,
  resourceName,
  resourcePatternType: ResourcePatternTypes.LITERAL,
  principal: 'User:alice',
  host: '*',
  operation,
  permissionType: AclPermissionTypes.ALLOW,
});

describe('kafkajs over SASL', () => {
  // Each case: admin (a super user) makes a topic and grants alice WRITE and READ on it
  // and READ on a group (CreateAcls, then DescribeAcls); alice produces and reads it all
  // back in that group, over the same listener and mechanism.
  const cases = [
    ['SASL_PLAINTEXT', 'SCRAM-SHA-256'],
    ['SASL_SSL', 'PLAIN'],
  ];
  for (const [listener, mechanism] of cases) {
    test(`${mechanism} over ${listener}: alice produces and consumes in a group`, TIMEOUT, async () => {
      const topic = unique(`kafkajs-${listener.toLowerCase()}`);
      const groupId = unique(`kafkajs-${listener.toLowerCase()}-group`);
      const admin = secured(listener, mechanism, 'admin').admin();
      await admin.connect();
      try {
        await admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true });
        await admin.createAcls({
          acl: [
            allowAlice(AclResourceTypes.TOPIC, topic, AclOperationTypes.WRITE),
            allowAlice(AclResourceTypes.TOPIC, topic, AclOperationTypes.READ),
            allowAlice(AclResourceTypes.GROUP, groupId, AclOperationTypes.READ),
          ],
        });
        const described = await admin.describeAcls({
          resourceType: AclResourceTypes.TOPIC,
          resourceName: topic,
          resourcePatternType: ResourcePatternTypes.LITERAL,
          principal: 'User:alice',
          host: '*',
          operation: AclOperationTypes.ANY,
          permissionType: AclPermissionTypes.ANY,
        });
        assert.deepEqual(
          described.resources.flatMap((r) => r.acls.map((a) => a.operation)).sort(),
          [AclOperationTypes.READ, AclOperationTypes.WRITE].sort(),
        );
      } finally {
        await admin.disconnect();
      }

      const alice = secured(listener, mechanism, 'alice');
      const producer = alice.producer({ createPartitioner: Partitioners.DefaultPartitioner });
      await producer.connect();
      try {
        const messages = Array.from({ length: 40 }, (_, i) => ({ partition: i % 2, value: `sasl-${i}` }));
        const results = await producer.send({ topic, acks: -1, messages });
        assert.deepEqual(results.map((r) => [r.partition, r.errorCode]).sort(), [
          [0, 0],
          [1, 0],
        ]);
      } finally {
        await producer.disconnect();
      }
      const { seen } = await consumeInGroup(groupId, topic, 40, {}, alice);
      assert.deepEqual(
        seen.map((m) => m.value).sort(),
        Array.from({ length: 40 }, (_, i) => `sasl-${i}`).sort(),
      );
    });
  }
});
