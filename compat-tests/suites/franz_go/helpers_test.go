// Package franzgo runs franz-go (kgo, the client, and kadm, its admin
// client) against the broker under test: admin, produce and consume with
// each codec, an idempotent producer and a consumer group with commits,
// transactions (commit, abort, read_committed, consume-transform-produce)
// and fencing.
//
// compat-tests/run franz-go builds these tests (suite.py: `go test -c`
// against the pinned go.mod and go.sum, modules and build cache under
// ~/.cache/kpybroker) and runs the binary under `go tool test2json`;
// COMPAT_BOOTSTRAP names the broker. Set COMPAT_FRANZ_GO_LOG=debug for
// franz-go's wire-level log (requests, versions, errors) on stderr.
package franzgo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The suite's name in test ids (`franz_go::TestName`), as the runner names them.
const suiteGroup = "franz_go"

var bootstrap string

func TestMain(m *testing.M) {
	bootstrap = os.Getenv("COMPAT_BOOTSTRAP")
	if bootstrap == "" {
		fmt.Fprintln(os.Stderr, "COMPAT_BOOTSTRAP is not set: run this suite through compat-tests/run franz-go")
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// testContext is the test's deadline: `limit`, or less when a known-failure
// entry asks for it (COMPAT_TEST_TIMEOUTS, fnmatch patterns on test ids).
func testContext(t *testing.T, limit time.Duration) context.Context {
	t.Helper()
	var timeouts map[string]float64
	if raw := os.Getenv("COMPAT_TEST_TIMEOUTS"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &timeouts); err != nil {
			t.Fatalf("COMPAT_TEST_TIMEOUTS: %v", err)
		}
	}
	id := suiteGroup + "::" + t.Name()
	for pattern, seconds := range timeouts {
		if fnmatch(pattern, id) {
			limit = min(limit, time.Duration(seconds*float64(time.Second)))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	return ctx
}

// fnmatch is Python's fnmatch.fnmatchcase (`*` crosses `/`), which the runner uses.
func fnmatch(pattern, name string) bool {
	var re strings.Builder
	re.WriteString("^")
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; c {
		case '*':
			re.WriteString(".*")
		case '?':
			re.WriteString(".")
		case '[':
			end := strings.IndexByte(pattern[i+1:], ']')
			if end < 0 {
				re.WriteString(`\[`)
				continue
			}
			class := pattern[i+1 : i+1+end]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			re.WriteString("[" + class + "]")
			i += end + 1
		default:
			re.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	re.WriteString("$")
	matched, err := regexp.MatchString(re.String(), name)
	return err == nil && matched
}

func logLevel() kgo.LogLevel {
	switch strings.ToLower(os.Getenv("COMPAT_FRANZ_GO_LOG")) {
	case "debug":
		return kgo.LogLevelDebug
	case "info":
		return kgo.LogLevelInfo
	case "error":
		return kgo.LogLevelError
	case "none":
		return kgo.LogLevelNone
	}
	return kgo.LogLevelWarn
}

// clientOpts are what every client of the suite gets, before its own options.
func clientOpts(name string) []kgo.Opt {
	prefix := "[" + name + "] "
	return []kgo.Opt{
		kgo.SeedBrokers(bootstrap),
		kgo.ClientID("compat-franz-go-" + name),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, logLevel(), func() string { return prefix })),
		// Short long-polls, so that closing a consumer does not wait 5 s.
		kgo.FetchMaxWait(500 * time.Millisecond),
	}
}

// newClient is a kgo client closed when the test ends.
func newClient(t *testing.T, name string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(clientOpts(name), opts...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient(%s): %v", name, err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// newAdmin is a kadm client (on a client of its own), closed when the test ends.
func newAdmin(t *testing.T) *kadm.Client {
	t.Helper()
	return kadm.NewClient(newClient(t, "admin"))
}

// unique is a topic, group or transactional id no other test (or run) uses.
func unique(stem string) string {
	return fmt.Sprintf("franz-go-%s-%08x", stem, rand.Uint32())
}

// createTopic creates a topic with `partitions` partitions (replication 1)
// and waits until Metadata gives every partition a leader.
func createTopic(t *testing.T, ctx context.Context, adm *kadm.Client, stem string, partitions int32) string {
	t.Helper()
	topic := unique(stem)
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("CreateTopic %s: %v (%s)", topic, err, resp.ErrMessage)
	}
	waitForLeaders(t, ctx, adm, topic, partitions)
	return topic
}

func waitForLeaders(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, partitions int32) kadm.TopicDetail {
	t.Helper()
	var last string
	for {
		details, err := adm.ListTopics(ctx, topic)
		if err == nil {
			d := details[topic]
			ready := d.Err == nil && len(d.Partitions) == int(partitions)
			for _, p := range d.Partitions {
				ready = ready && p.Err == nil && p.Leader >= 0
			}
			if ready {
				return d
			}
			last = fmt.Sprintf("%+v", d)
		} else {
			last = err.Error()
		}
		if !sleep(ctx, 100*time.Millisecond) {
			t.Fatalf("topic %s: no leader for each of its %d partitions in time; last metadata: %s", topic, partitions, last)
		}
	}
}

// sleep waits `d`; false when the context ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// eventually retries `check` (which returns "" when satisfied, or what is
// still wrong) every 100 ms until it holds or the context ends.
func eventually(t *testing.T, ctx context.Context, what string, check func() string) {
	t.Helper()
	for {
		wrong := check()
		if wrong == "" {
			return
		}
		if !sleep(ctx, 100*time.Millisecond) {
			t.Fatalf("%s: never held; last: %s", what, wrong)
		}
	}
}

// consumeExactly polls until `n` records arrived, then for another moment
// to see that no more come; it fails on fetch errors, on a timeout and on
// any record beyond `n`.
func consumeExactly(t *testing.T, ctx context.Context, cl *kgo.Client, n int) []*kgo.Record {
	t.Helper()
	var got []*kgo.Record
	for len(got) < n {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("timed out with %d of %d records: %s", len(got), n, describe(got))
		}
		failOnFetchErrors(t, fetches)
		got = append(got, fetches.Records()...)
	}
	// Anything beyond n would arrive within one more long-poll.
	quiet, cancel := context.WithTimeout(ctx, 1200*time.Millisecond)
	defer cancel()
	for quiet.Err() == nil {
		fetches := cl.PollFetches(quiet)
		if quiet.Err() == nil {
			failOnFetchErrors(t, fetches)
		}
		got = append(got, fetches.Records()...)
	}
	if len(got) != n {
		t.Fatalf("expected %d records, got %d: %s", n, len(got), describe(got))
	}
	return got
}

func failOnFetchErrors(t *testing.T, fetches kgo.Fetches) {
	t.Helper()
	var problems []string
	fetches.EachError(func(topic string, partition int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			problems = append(problems, fmt.Sprintf("%s[%d]: %v", topic, partition, err))
		}
	})
	if len(problems) > 0 {
		t.Fatalf("fetch errors: %s", strings.Join(problems, "; "))
	}
}

// reader consumes `topics` from the start, without a group, at an isolation level.
func reader(t *testing.T, name string, isolation kgo.IsolationLevel, topics ...string) *kgo.Client {
	t.Helper()
	return newClient(t, name,
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(isolation),
	)
}

// values are the records' values, partition by partition, in offset order.
func values(records []*kgo.Record) map[int32][]string {
	byPartition := map[int32][]string{}
	sorted := slices.Clone(records)
	slices.SortStableFunc(sorted, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	for _, r := range sorted {
		byPartition[r.Partition] = append(byPartition[r.Partition], string(r.Value))
	}
	return byPartition
}

func describe(records []*kgo.Record) string {
	if len(records) > 12 {
		return fmt.Sprintf("%v ...", values(records[:12]))
	}
	return fmt.Sprintf("%v", values(records))
}

// endOffsets are ListOffsets(latest) per partition, read_uncommitted or read_committed (the LSO).
func endOffsets(t *testing.T, ctx context.Context, adm *kadm.Client, committed bool, topic string) map[int32]int64 {
	t.Helper()
	list := adm.ListEndOffsets
	if committed {
		list = adm.ListCommittedOffsets
	}
	listed, err := list(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		t.Fatalf("ListOffsets %s (committed=%v): %v", topic, committed, err)
	}
	offsets := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) { offsets[o.Partition] = o.Offset })
	return offsets
}

// groupOffsets are the group's committed offsets in `topic` (OffsetFetch).
func groupOffsets(t *testing.T, ctx context.Context, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	fetched, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = fetched.Error()
	}
	if err != nil {
		t.Fatalf("OffsetFetch %s: %v", group, err)
	}
	offsets := map[int32]int64{}
	for partition, o := range fetched[topic] {
		offsets[partition] = o.At
	}
	return offsets
}

// stableGroupOffsets are the group's committed offsets in `topic` as
// OffsetFetch with require_stable answers them: it retries while the broker
// says UNSTABLE_OFFSET_COMMIT (a transaction that commits offsets is still
// being completed), and fails if they are not `want` once it answers.
func stableGroupOffsets(t *testing.T, ctx context.Context, adm *kadm.Client, group, topic string, want map[int32]int64) {
	t.Helper()
	for {
		fetched, err := adm.FetchOffsets(kadm.RequireStable(ctx), group)
		if err == nil {
			err = fetched.Error()
		}
		if err == nil {
			got := map[int32]int64{}
			for partition, o := range fetched[topic] {
				got[partition] = o.At
			}
			if !equalMaps(got, want) {
				t.Fatalf("OffsetFetch(require_stable) of %s: %v, want %v", group, got, want)
			}
			return
		}
		if !errors.Is(err, kerr.UnstableOffsetCommit) {
			t.Fatalf("OffsetFetch(require_stable) of %s: %v", group, err)
		}
		if !sleep(ctx, 50*time.Millisecond) {
			t.Fatalf("OffsetFetch(require_stable) of %s: still %v", group, err)
		}
	}
}

// same is every partition 0..n-1 at `offset`.
func same(n int32, offset int64) map[int32]int64 {
	offsets := map[int32]int64{}
	for p := range n {
		offsets[p] = offset
	}
	return offsets
}

func equalMaps[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
