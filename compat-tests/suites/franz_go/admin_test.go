package franzgo

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kadm: create a topic with a config, list and describe it, delete it.
func TestAdminTopics(t *testing.T) {
	ctx := testContext(t, 60*time.Second)
	adm := newAdmin(t)

	brokers, err := adm.ListBrokers(ctx)
	if err != nil || len(brokers) != 1 {
		t.Fatalf("ListBrokers: %v %+v", err, brokers)
	}
	broker := brokers[0].NodeID

	topic := unique("admin")
	retention := "3600000"
	created, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"retention.ms": &retention}, topic)
	if err != nil || created.Err != nil {
		t.Fatalf("CreateTopic: %v / %v (%s)", err, created.Err, created.ErrMessage)
	}
	if created.NumPartitions != 3 || created.ReplicationFactor != 1 {
		t.Errorf("CreateTopic answered %d partitions, replication %d; want 3, 1",
			created.NumPartitions, created.ReplicationFactor)
	}
	if c, ok := created.Configs["retention.ms"]; !ok || c.MaybeValue() != retention {
		t.Errorf("CreateTopic's configs: retention.ms = %+v, want %s", c, retention)
	}

	// kadm returns the topic's error both ways.
	again, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
	if !errors.Is(err, kerr.TopicAlreadyExists) || !errors.Is(again.Err, kerr.TopicAlreadyExists) {
		t.Errorf("creating %s again: %v / %v, want TOPIC_ALREADY_EXISTS", topic, err, again.Err)
	}

	detail := waitForLeaders(t, ctx, adm, topic, 3)
	if detail.IsInternal {
		t.Errorf("%s is listed as internal", topic)
	}
	for _, p := range detail.Partitions.Sorted() {
		if p.Leader != broker || !slices.Equal(p.Replicas, []int32{broker}) || !slices.Equal(p.ISR, []int32{broker}) {
			t.Errorf("partition %d: leader %d replicas %v isr %v, want all broker %d",
				p.Partition, p.Leader, p.Replicas, p.ISR, broker)
		}
	}

	all, err := adm.ListTopics(ctx)
	if err != nil || !all.Has(topic) {
		t.Errorf("ListTopics (all): %v; has %s: %v", err, topic, all.Has(topic))
	}
	if all.Has("__consumer_offsets") {
		t.Errorf("ListTopics (all) lists the internal __consumer_offsets")
	}

	configs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatalf("DescribeTopicConfigs: %v", err)
	}
	rc, err := configs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("DescribeTopicConfigs %s: %v / %v", topic, err, rc.Err)
	}
	found := false
	for _, c := range rc.Configs {
		switch c.Key {
		case "retention.ms":
			found = true
			if c.MaybeValue() != retention || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
				t.Errorf("retention.ms = %q from %v, want %s from DYNAMIC_TOPIC_CONFIG", c.MaybeValue(), c.Source, retention)
			}
		case "cleanup.policy":
			if c.MaybeValue() != "delete" || c.Source != kmsg.ConfigSourceDefaultConfig {
				t.Errorf("cleanup.policy = %q from %v, want delete from DEFAULT_CONFIG", c.MaybeValue(), c.Source)
			}
		}
	}
	if !found {
		t.Errorf("DescribeTopicConfigs lists no retention.ms")
	}

	starts := endOffsets(t, ctx, adm, false, topic)
	if !equalMaps(starts, same(3, 0)) {
		t.Errorf("end offsets of the new topic: %v, want 0 each", starts)
	}

	deleted, err := adm.DeleteTopic(ctx, topic)
	if err != nil || deleted.Err != nil {
		t.Fatalf("DeleteTopic: %v / %v (%s)", err, deleted.Err, deleted.ErrMessage)
	}
	eventually(t, ctx, "the deleted topic disappears from Metadata", func() string {
		details, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return err.Error()
		}
		if d := details[topic]; !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			return "still there: " + topic
		}
		return ""
	})
	gone, err := adm.DeleteTopic(ctx, topic)
	if !errors.Is(err, kerr.UnknownTopicOrPartition) || !errors.Is(gone.Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("deleting %s again: %v / %v, want UNKNOWN_TOPIC_OR_PARTITION", topic, err, gone.Err)
	}
}
