package franzgo

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// transactional is a producer with a transactional id, writing to the partition each record names.
func transactional(t *testing.T, name, txnID, topic string) *kgo.Client {
	t.Helper()
	return newClient(t, name,
		kgo.TransactionalID(txnID),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DefaultProduceTopic(topic),
	)
}

// produceInTxn begins a transaction and writes `n` records "<prefix>-i" to
// partitions i%partitions, synchronously; it leaves the transaction open.
func produceInTxn(t *testing.T, ctx context.Context, cl *kgo.Client, prefix string, n int, partitions int32) []*kgo.Record {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("BeginTransaction (%s): %v", prefix, err)
	}
	var records []*kgo.Record
	for i := range n {
		records = append(records, &kgo.Record{
			Partition: int32(i) % partitions,
			Value:     []byte(fmt.Sprintf("%s-%d", prefix, i)),
		})
	}
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatalf("ProduceSync in transaction (%s): %v", prefix, err)
	}
	return records
}

// byPartition is what values() gives for records produced by produceInTxn.
func byPartition(records ...[]*kgo.Record) map[int32][]string {
	var all []*kgo.Record
	for _, rs := range records {
		all = append(all, rs...)
	}
	return values(all)
}

func describeTxn(t *testing.T, ctx context.Context, adm *kadm.Client, txnID string) kadm.DescribedTransaction {
	t.Helper()
	described, err := adm.DescribeTransactions(ctx, txnID)
	if err != nil {
		t.Fatalf("DescribeTransactions %s: %v", txnID, err)
	}
	d := described[txnID]
	if d.Err != nil {
		t.Fatalf("DescribeTransactions %s: %v", txnID, d.Err)
	}
	return d
}

// A transactional producer commits one transaction, aborts the next and
// leaves a third open: read_committed stops at the open one (the last
// stable offset) and never returns aborted records, read_uncommitted returns
// everything; once the third commits, read_committed sees it too.
func TestTransactionCommitAbort(t *testing.T) {
	ctx := testContext(t, 60*time.Second)
	adm := newAdmin(t)
	const partitions = 2
	topic := createTopic(t, ctx, adm, "txn", partitions)
	txnID := unique("txn")
	producer := transactional(t, "txn", txnID, topic)

	committed := produceInTxn(t, ctx, producer, "committed", 10, partitions)
	if err := producer.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("EndTransaction(commit): %v", err)
	}
	aborted := produceInTxn(t, ctx, producer, "aborted", 10, partitions)
	if err := producer.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatalf("EndTransaction(abort): %v", err)
	}
	// One producer id throughout; the epoch stays (transaction version 1) or
	// moves up at each transaction's end (version 2, KIP-890).
	epoch := committed[0].ProducerEpoch
	for _, r := range slices.Concat(committed, aborted) {
		if r.ProducerID != committed[0].ProducerID || r.ProducerEpoch < epoch {
			t.Fatalf("record %q: producer %d epoch %d, after producer %d epoch %d",
				r.Value, r.ProducerID, r.ProducerEpoch, committed[0].ProducerID, epoch)
		}
		epoch = r.ProducerEpoch
	}

	open := produceInTxn(t, ctx, producer, "open", 4, partitions)
	// The last stable offset is each partition's first offset of the open transaction.
	lso := endOffsets(t, ctx, adm, true, topic)
	high := endOffsets(t, ctx, adm, false, topic)
	for _, r := range open[:partitions] {
		if lso[r.Partition] != r.Offset {
			t.Errorf("partition %d: read_committed end offset %d during the open transaction, want its first offset %d",
				r.Partition, lso[r.Partition], r.Offset)
		}
		if high[r.Partition] != r.Offset+2 {
			t.Errorf("partition %d: end offset %d, want %d", r.Partition, high[r.Partition], r.Offset+2)
		}
	}
	if d := describeTxn(t, ctx, adm, txnID); d.State != "Ongoing" || !reflect.DeepEqual(d.Topics[topic], map[int32]struct{}{0: {}, 1: {}}) {
		t.Errorf("DescribeTransactions during the open transaction: state %q, partitions %v; want Ongoing, %s[0 1]",
			d.State, d.Topics, topic)
	}
	watcher := reader(t, "read-committed-watcher", kgo.ReadCommitted(), topic)
	if got := values(consumeExactly(t, ctx, watcher, len(committed))); !reflect.DeepEqual(got, byPartition(committed)) {
		t.Fatalf("read_committed during the open transaction read %v, want %v", got, byPartition(committed))
	}

	if err := producer.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("EndTransaction(commit) of the third: %v", err)
	}
	if got := values(consumeExactly(t, ctx, watcher, len(open))); !reflect.DeepEqual(got, byPartition(open)) {
		t.Fatalf("read_committed after the third committed read %v, want %v", got, byPartition(open))
	}

	lso = endOffsets(t, ctx, adm, true, topic)
	high = endOffsets(t, ctx, adm, false, topic)
	if !equalMaps(lso, high) || !equalMaps(high, same(partitions, 5+1+5+1+2+1)) {
		t.Errorf("after the last commit: read_committed end offsets %v, end offsets %v; want both 15 (records and markers)", lso, high)
	}
	eventually(t, ctx, "DescribeTransactions says CompleteCommit", func() string {
		if d := describeTxn(t, ctx, adm, txnID); d.State != "CompleteCommit" || len(d.Topics) != 0 {
			return fmt.Sprintf("state %q, partitions %v", d.State, d.Topics)
		}
		return ""
	})

	committedReader := reader(t, "read-committed", kgo.ReadCommitted(), topic)
	if got := values(consumeExactly(t, ctx, committedReader, 14)); !reflect.DeepEqual(got, byPartition(committed, open)) {
		t.Errorf("read_committed read %v, want %v", got, byPartition(committed, open))
	}
	uncommittedReader := reader(t, "read-uncommitted", kgo.ReadUncommitted(), topic)
	if got := values(consumeExactly(t, ctx, uncommittedReader, 24)); !reflect.DeepEqual(got, byPartition(committed, aborted, open)) {
		t.Errorf("read_uncommitted read %v, want %v", got, byPartition(committed, aborted, open))
	}
}

// Consume-transform-produce with a GroupTransactSession: each polled batch
// is copied to an output topic and the group's offsets are committed in the
// same transaction (TxnOffsetCommit); one batch is aborted, and the session
// rewinds to the committed offsets and copies it again. The output then has
// each input record exactly once (read_committed), and the group's
// committed offsets are at the input's end.
func TestTransactCopyLoop(t *testing.T) {
	ctx := testContext(t, 90*time.Second)
	adm := newAdmin(t)
	const partitions, perPartition = 3, 30
	input := createTopic(t, ctx, adm, "copy-in", partitions)
	output := createTopic(t, ctx, adm, "copy-out", partitions)
	group := unique("copy")

	source := newClient(t, "source", kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(input))
	var inputs []*kgo.Record
	for i := range partitions * perPartition {
		inputs = append(inputs, &kgo.Record{Partition: int32(i % partitions), Value: []byte(fmt.Sprintf("in-%d", i))})
	}
	if err := source.ProduceSync(ctx, inputs...).FirstErr(); err != nil {
		t.Fatalf("ProduceSync of the input: %v", err)
	}

	session, err := kgo.NewGroupTransactSession(append(clientOpts("copier"),
		kgo.TransactionalID(unique("copier")),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(input),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DefaultProduceTopic(output),
	)...)
	if err != nil {
		t.Fatalf("NewGroupTransactSession: %v", err)
	}
	t.Cleanup(session.Close)

	copied, abortedCopies, transactions := 0, 0, 0
	for copied < len(inputs) {
		fetches := session.PollRecords(ctx, 25)
		if ctx.Err() != nil {
			t.Fatalf("timed out having copied %d of %d records in %d transactions", copied, len(inputs), transactions)
		}
		failOnFetchErrors(t, fetches)
		records := fetches.Records()
		if len(records) == 0 {
			continue
		}
		if err := session.Begin(); err != nil {
			t.Fatalf("Begin: %v", err)
		}
		var outs []*kgo.Record
		for _, r := range records {
			outs = append(outs, &kgo.Record{Partition: r.Partition, Key: r.Key, Value: []byte("copy:" + string(r.Value))})
		}
		// Written before End, also when it aborts: the aborted copies are in the log.
		if err := session.ProduceSync(ctx, outs...).FirstErr(); err != nil {
			t.Fatalf("produce in copy transaction %d: %v", transactions+1, err)
		}
		transactions++
		commit := transactions != 2 // the second transaction is aborted
		ok, err := session.End(ctx, kgo.TransactionEndTry(commit))
		if err != nil {
			t.Fatalf("End(commit=%v) of transaction %d: %v", commit, transactions, err)
		}
		if ok != commit {
			t.Fatalf("End(commit=%v) of transaction %d committed: %v", commit, transactions, ok)
		}
		if commit {
			copied += len(records)
		} else {
			abortedCopies = len(records)
		}
	}
	if copied != len(inputs) || abortedCopies == 0 || transactions < 3 {
		t.Fatalf("copied %d records (want %d) in %d transactions, %d aborted copies", copied, len(inputs), transactions, abortedCopies)
	}

	// The input's end; the last transaction's offsets may still be pending.
	stableGroupOffsets(t, ctx, adm, group, input, same(partitions, perPartition))
	want := map[int32][]string{}
	for p, vs := range values(inputs) {
		for _, v := range vs {
			want[p] = append(want[p], "copy:"+v)
		}
	}
	committedReader := reader(t, "copy-read-committed", kgo.ReadCommitted(), output)
	if got := values(consumeExactly(t, ctx, committedReader, len(inputs))); !reflect.DeepEqual(got, want) {
		t.Errorf("read_committed output %v, want each input once: %v", got, want)
	}
	uncommittedReader := reader(t, "copy-read-uncommitted", kgo.ReadUncommitted(), output)
	consumeExactly(t, ctx, uncommittedReader, len(inputs)+abortedCopies)
	if lso, high := endOffsets(t, ctx, adm, true, output), endOffsets(t, ctx, adm, false, output); !equalMaps(lso, high) {
		t.Errorf("output: read_committed end offsets %v, end offsets %v; want equal (no open transaction)", lso, high)
	}
}

// A second producer with the same transactional id fences the first: its
// InitProducerId aborts the first one's open transaction and bumps the
// epoch, and the first producer's commit fails with PRODUCER_FENCED.
func TestTransactionFencing(t *testing.T) {
	ctx := testContext(t, 60*time.Second)
	adm := newAdmin(t)
	topic := createTopic(t, ctx, adm, "fence", 1)
	txnID := unique("fence")

	first := transactional(t, "fenced", txnID, topic)
	zombie := produceInTxn(t, ctx, first, "first", 3, 1)

	second := transactional(t, "fencer", txnID, topic)
	winner := produceInTxn(t, ctx, second, "second", 3, 1)
	if err := second.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("EndTransaction(commit) of the second producer: %v", err)
	}
	if winner[0].ProducerID != zombie[0].ProducerID || winner[0].ProducerEpoch <= zombie[0].ProducerEpoch {
		t.Errorf("second producer: id %d epoch %d; the first had id %d epoch %d (want the same id, a higher epoch)",
			winner[0].ProducerID, winner[0].ProducerEpoch, zombie[0].ProducerID, zombie[0].ProducerEpoch)
	}

	err := first.EndTransaction(ctx, kgo.TryCommit)
	if !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("the fenced producer's EndTransaction(commit): %v, want PRODUCER_FENCED", err)
	}
	// The fenced producer stays failed.
	if err := first.BeginTransaction(); err == nil {
		if err := first.ProduceSync(ctx, &kgo.Record{Value: []byte("first-again")}).FirstErr(); err == nil {
			t.Errorf("the fenced producer produced again")
		}
	}

	committedReader := reader(t, "fence-read-committed", kgo.ReadCommitted(), topic)
	if got := values(consumeExactly(t, ctx, committedReader, 3)); !reflect.DeepEqual(got, byPartition(winner)) {
		t.Errorf("read_committed read %v, want only the second producer's %v", got, byPartition(winner))
	}
	uncommittedReader := reader(t, "fence-read-uncommitted", kgo.ReadUncommitted(), topic)
	if got := values(consumeExactly(t, ctx, uncommittedReader, 6)); !reflect.DeepEqual(got, byPartition(zombie, winner)) {
		t.Errorf("read_uncommitted read %v, want %v", got, byPartition(zombie, winner))
	}
}
