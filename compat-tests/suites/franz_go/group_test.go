package franzgo

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// franz-go's default producer (idempotent, acks=all, several requests in
// flight) appends everything once and in order; a consumer group member
// reads it all and commits, and a second member of the group, after the
// first left, resumes from those commits and commits on leaving.
func TestIdempotentProducerAndGroup(t *testing.T) {
	ctx := testContext(t, 60*time.Second)
	adm := newAdmin(t)
	const partitions = 3
	topic := createTopic(t, ctx, adm, "group", partitions)
	group := unique("group")

	producer := newClient(t, "idempotent", kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic))
	produce := func(from, to int) map[int32][]string {
		t.Helper()
		want := map[int32][]string{}
		var (
			failed = make(chan error, to-from)
			sent   []*kgo.Record
		)
		for i := from; i < to; i++ {
			r := &kgo.Record{Partition: int32(i % partitions), Value: []byte(fmt.Sprintf("v%d", i))}
			want[r.Partition] = append(want[r.Partition], string(r.Value))
			sent = append(sent, r)
			producer.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					failed <- err
				}
			})
		}
		if err := producer.Flush(ctx); err != nil {
			t.Fatalf("Flush: %v", err)
		}
		close(failed)
		for err := range failed {
			t.Fatalf("produce: %v", err)
		}
		for _, r := range sent {
			if r.ProducerID < 0 {
				t.Fatalf("record %q was produced without a producer id (not idempotent)", r.Value)
			}
		}
		return want
	}

	first := produce(0, 300)
	if got := endOffsets(t, ctx, adm, false, topic); !equalMaps(got, same(partitions, 100)) {
		t.Fatalf("end offsets after 300 idempotent records: %v, want 100 each", got)
	}

	member := newClient(t, "member-1",
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
	)
	if got := values(consumeExactly(t, ctx, member, 300)); !reflect.DeepEqual(got, first) {
		t.Fatalf("the group read %v, want %v", got, first)
	}
	if err := member.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("CommitUncommittedOffsets: %v", err)
	}
	if got := groupOffsets(t, ctx, adm, group, topic); !equalMaps(got, same(partitions, 100)) {
		t.Fatalf("committed offsets %v, want 100 each", got)
	}
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil || described.Error() != nil {
		t.Fatalf("DescribeGroups: %v / %v", err, described.Error())
	}
	if g := described[group]; g.State != "Stable" || len(g.Members) != 1 || g.ProtocolType != "consumer" {
		t.Errorf("group while member-1 consumes: state %q, %d members, protocol type %q; want Stable, 1, consumer",
			g.State, len(g.Members), g.ProtocolType)
	}
	member.Close() // leaves the group
	eventually(t, ctx, "the group is Empty once its member left", func() string {
		described, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return err.Error()
		}
		if g := described[group]; g.State != "Empty" || len(g.Members) != 0 {
			return fmt.Sprintf("state %q with %d members", g.State, len(g.Members))
		}
		return ""
	})

	second := produce(300, 360)
	resumed := newClient(t, "member-2",
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), // must not apply: the group has offsets
		kgo.AutoCommitInterval(500*time.Millisecond),
	)
	got := consumeExactly(t, ctx, resumed, 60)
	if read := values(got); !reflect.DeepEqual(read, second) {
		t.Fatalf("the resumed member read %v, want only the new records %v", read, second)
	}
	for _, r := range got {
		if r.Offset < 100 {
			t.Fatalf("the resumed member read partition %d offset %d, below the committed 100", r.Partition, r.Offset)
		}
	}
	resumed.Close() // commits what it read (the default OnPartitionsRevoked), then leaves
	if got := groupOffsets(t, ctx, adm, group, topic); !equalMaps(got, same(partitions, 120)) {
		t.Fatalf("committed offsets after member-2 left: %v, want 120 each", got)
	}
	lags, err := adm.Lag(ctx, group)
	if err != nil {
		t.Fatalf("Lag: %v", err)
	}
	lag := lags[group]
	if err := lag.Error(); err != nil {
		t.Fatalf("Lag %s: %v", group, err)
	}
	if total := lag.Lag.Total(); total != 0 {
		t.Errorf("the group's lag is %d, want 0", total)
	}
}
