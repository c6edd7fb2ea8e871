package franzgo

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// compressionSeen records the codec of every batch a consumer read.
type compressionSeen struct {
	mu     sync.Mutex
	codecs map[uint8]int
}

func (h *compressionSeen) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.codecs[m.CompressionType]++
}

// Synchronous produce of keyed records with headers to three partitions,
// once per codec, and a consumer reading back exactly what was written, in
// batches that are still compressed with the producer's codec.
func TestProduceConsume(t *testing.T) {
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
		id    uint8 // the batch attribute's codec bits
	}{
		{"none", kgo.NoCompression(), 0},
		{"gzip", kgo.GzipCompression(), 1},
		{"snappy", kgo.SnappyCompression(), 2},
		{"lz4", kgo.Lz4Compression(), 3},
		{"zstd", kgo.ZstdCompression(), 4},
	}
	adm := newAdmin(t)
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			ctx := testContext(t, 45*time.Second)
			const partitions, perPartition = 3, 40
			topic := createTopic(t, ctx, adm, "produce-"+c.name, partitions)

			producer := newClient(t, "producer-"+c.name,
				kgo.ProducerBatchCompression(c.codec),
				kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.DefaultProduceTopic(topic),
			)
			var sent []*kgo.Record
			for i := range partitions * perPartition {
				r := &kgo.Record{
					Partition: int32(i % partitions),
					Key:       []byte(fmt.Sprintf("key-%d", i)),
					// Compressible, so that every codec keeps its compression.
					Value: []byte(fmt.Sprintf("value-%d-%s", i, strings.Repeat(c.name, 20))),
					Headers: []kgo.RecordHeader{
						{Key: "codec", Value: []byte(c.name)},
						{Key: "index", Value: []byte(fmt.Sprint(i))},
					},
				}
				if i%10 == 9 {
					r.Key = nil // a null key
				}
				sent = append(sent, r)
			}
			if err := producer.ProduceSync(ctx, sent...).FirstErr(); err != nil {
				t.Fatalf("ProduceSync: %v", err)
			}
			for i, r := range sent {
				if want := int64(i / partitions); r.Offset != want {
					t.Fatalf("record %d went to partition %d offset %d, want offset %d", i, r.Partition, r.Offset, want)
				}
			}
			if got := endOffsets(t, ctx, adm, false, topic); !equalMaps(got, same(partitions, perPartition)) {
				t.Fatalf("end offsets %v, want %d each", got, perPartition)
			}

			seen := &compressionSeen{codecs: map[uint8]int{}}
			consumer := newClient(t, "consumer-"+c.name,
				kgo.ConsumeTopics(topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.WithHooks(seen),
			)
			got := consumeExactly(t, ctx, consumer, len(sent))
			byPosition := map[[2]int64]*kgo.Record{}
			for _, r := range got {
				byPosition[[2]int64{int64(r.Partition), r.Offset}] = r
			}
			for i, want := range sent {
				r := byPosition[[2]int64{int64(want.Partition), want.Offset}]
				if r == nil {
					t.Fatalf("record %d (partition %d offset %d) not consumed", i, want.Partition, want.Offset)
				}
				if !bytes.Equal(r.Key, want.Key) || (r.Key == nil) != (want.Key == nil) ||
					!bytes.Equal(r.Value, want.Value) || !sameHeaders(r.Headers, want.Headers) {
					t.Fatalf("record %d: got key %q value %q headers %v, want key %q value %q headers %v",
						i, r.Key, r.Value, r.Headers, want.Key, want.Value, want.Headers)
				}
				if r.Timestamp.Sub(want.Timestamp).Abs() > time.Millisecond {
					t.Errorf("record %d: timestamp %v, produced with %v", i, r.Timestamp, want.Timestamp)
				}
			}
			seen.mu.Lock()
			defer seen.mu.Unlock()
			if len(seen.codecs) != 1 || seen.codecs[c.id] == 0 {
				t.Errorf("batches read by codec id %v, want all %d (%s)", seen.codecs, c.id, c.name)
			}
		})
	}
}

func sameHeaders(a, b []kgo.RecordHeader) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !bytes.Equal(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}
