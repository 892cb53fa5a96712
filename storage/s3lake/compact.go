package s3lake

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/retry"
	"github.com/chatguard/chatguard/pipeline"
)

// Compaction merges the many small objects the consumer leaves in a closed
// partition-hour (one per replica per flush, about 60 per replica per hour
// at steady load) into few large ones, because every Athena query pays per
// object: a request, a footer read and scheduling.
//
// A run is safe to repeat and to run on two pods at once, without locks:
//
//   - Outputs are named after their inputs ("compact-" + a hash of the input
//     keys), and encoding is deterministic, so two runs over the same inputs
//     write the same object with the same bytes.
//   - An input is deleted only after the output holding its rows is written
//     (S3 PUT is atomic and reads after it are consistent), so every row is
//     in some object at every moment. While both exist, the rows are there
//     twice and the _dedup views (which keep the earliest received copy of
//     an event id) return each once; a compacted object keeps that copy.
//   - Two runs that saw different inputs (a late event arrived between their
//     listings) leave two outputs that overlap; both are below the size
//     that marks an object finished, so the next run merges them.

// ErrNotFound is wrapped by CompactStore.Get when the key does not exist.
var ErrNotFound = errors.New("no such key")

// CompactedPrefix starts the name of every object compaction writes; the
// consumer's own objects start with "part-".
const CompactedPrefix = "compact-"

// ObjectInfo is one listed object.
type ObjectInfo struct {
	Key  string
	Size int64
}

// CompactStore is what compaction needs of the lake's bucket: Store, or an
// in-memory store in tests.
type CompactStore interface {
	// ListObjects returns every object under prefix with its size.
	ListObjects(ctx context.Context, prefix string) ([]ObjectInfo, error)
	// Get returns an object's bytes.
	Get(ctx context.Context, key string) ([]byte, error)
	// Put writes an object whole; a reader sees the old or the new bytes.
	Put(ctx context.Context, key string, body []byte, contentType string) error
	// Delete removes objects; a key that is already gone is not an error.
	Delete(ctx context.Context, keys []string) error
}

// CompactConfig tunes a Compactor.
type CompactConfig struct {
	// EventsPrefix is the lake's events prefix (DefaultEventsPrefix).
	EventsPrefix string
	// TargetBytes is the size compaction aims for: inputs are grouped
	// until their sizes add up to it, and an earlier output of at least
	// half of it counts as finished and is left alone. Memory per group in
	// flight is a few times this (the decoded rows).
	TargetBytes int64
	// Grace is how long after an hour ends it is left to late events before
	// it is compacted. Events that arrive later still land (as small
	// objects) and are merged by the next run that covers the hour.
	Grace time.Duration
	// Lookback is how far back a run looks for closed hours; hours older
	// than that were compacted by earlier runs.
	Lookback time.Duration
	// Concurrency is the number of partition-hours compacted at once.
	Concurrency int
	// DryRun plans and reports but reads, writes and deletes nothing.
	DryRun bool
	// Retry bounds the retries of each S3 call.
	Retry retry.Policy
	// AfterWrite, when set, is called once a partition's outputs are
	// written and before its inputs are deleted (tests look at the lake in
	// that moment).
	AfterWrite func(ctx context.Context, p pipeline.LakePartition, written []string)
	// Logger receives one line per compacted partition (slog.Default when
	// nil).
	Logger *slog.Logger
}

// DefaultCompactConfig returns the defaults of `consumer compact`.
func DefaultCompactConfig() CompactConfig {
	return CompactConfig{
		EventsPrefix: DefaultEventsPrefix,
		TargetBytes:  128 << 20,
		Grace:        time.Hour,
		Lookback:     48 * time.Hour,
		Concurrency:  2,
		Retry:        retry.Policy{Initial: 200 * time.Millisecond, Max: 10 * time.Second, Attempts: 6},
	}
}

// Validate reports every problem at once, in the words of the flags.
func (c CompactConfig) Validate() error {
	var errs []error
	if c.TargetBytes < 1<<20 {
		errs = append(errs, fmt.Errorf("--compact-target-bytes %d must be at least 1 MiB", c.TargetBytes))
	}
	if c.Grace < 0 {
		errs = append(errs, fmt.Errorf("--compact-grace %s must not be negative", c.Grace))
	}
	if c.Lookback < time.Hour {
		errs = append(errs, fmt.Errorf("--compact-lookback %s must be at least 1h", c.Lookback))
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("--compact-concurrency %d must be at least 1", c.Concurrency))
	}
	if c.Retry.Attempts < 1 {
		errs = append(errs, errors.New("compact: retry attempts must be at least 1"))
	}
	return errors.Join(errs...)
}

// CompactReport is what a run did, summed over partitions.
type CompactReport struct {
	// Partitions is the number of partition-hours looked at; Compacted
	// those where objects were merged.
	Partitions, Compacted int
	// ObjectsBefore and ObjectsAfter count the objects of the partitions
	// looked at, before and after the run.
	ObjectsBefore, ObjectsAfter int
	// RowsIn were read; RowsOut written. The difference is duplicate
	// copies of an event dropped.
	RowsIn, RowsOut int
	// BytesIn were read; BytesOut written.
	BytesIn, BytesOut int64
	// Failed counts partitions whose compaction failed (see the error);
	// Skipped those left because another run changed them meanwhile.
	Failed, Skipped int
}

func (r *CompactReport) add(o CompactReport) {
	r.Partitions += o.Partitions
	r.Compacted += o.Compacted
	r.ObjectsBefore += o.ObjectsBefore
	r.ObjectsAfter += o.ObjectsAfter
	r.RowsIn += o.RowsIn
	r.RowsOut += o.RowsOut
	r.BytesIn += o.BytesIn
	r.BytesOut += o.BytesOut
	r.Failed += o.Failed
	r.Skipped += o.Skipped
}

// String is the report's one line.
func (r CompactReport) String() string {
	return fmt.Sprintf("compact: %d partition-hours, %d compacted, %d failed, %d skipped; objects %d -> %d; rows %d -> %d (%d duplicates dropped); bytes %d -> %d",
		r.Partitions, r.Compacted, r.Failed, r.Skipped, r.ObjectsBefore, r.ObjectsAfter, r.RowsIn, r.RowsOut, r.RowsIn-r.RowsOut, r.BytesIn, r.BytesOut)
}

// Compactor merges the small objects of closed partition-hours. It is safe
// for concurrent use, and its runs are safe to overlap with each other and
// with the consumer writing.
type Compactor struct {
	store CompactStore
	cfg   CompactConfig
	clk   clock.Clock // which hours are closed, and the waits between retries
}

// CompactOption sets what a Compactor is built with besides its config:
// the collaborators an operator does not configure.
type CompactOption func(*Compactor)

// CompactClock runs the compactor on c instead of the wall clock (nil
// keeps the wall clock): c's now decides which hours are closed, and the
// waits between retries of an S3 call are on c.
func CompactClock(c clock.Clock) CompactOption {
	return func(co *Compactor) { co.clk = clock.Or(c) }
}

// NewCompactor returns a Compactor over store, or the configuration's
// problems.
func NewCompactor(store CompactStore, cfg CompactConfig, opts ...CompactOption) (*Compactor, error) {
	if store == nil {
		return nil, errors.New("s3lake: compact: no store")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("s3lake: compact: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Compactor{store: store, cfg: cfg, clk: clock.Real()}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// ClosedHours returns the hours a run at now covers: every hour that ended
// at least grace ago and started less than lookback ago, oldest first.
func ClosedHours(now time.Time, grace, lookback time.Duration) []time.Time {
	last := now.UTC().Add(-grace).Truncate(time.Hour).Add(-time.Hour)
	first := now.UTC().Add(-lookback).Truncate(time.Hour)
	var hours []time.Time
	for h := first; !h.After(last); h = h.Add(time.Hour) {
		hours = append(hours, h)
	}
	return hours
}

// Run compacts every closed partition-hour of every event type within the
// lookback. A partition that fails is reported and skipped (its objects
// are left as they were, which loses nothing); Run returns the report and
// the joined errors of the failed partitions, or ctx's cause when it was
// cancelled (partitions not yet started are not compacted; one in flight
// either finished its writes or deletes nothing).
func (c *Compactor) Run(ctx context.Context) (CompactReport, error) {
	hours := ClosedHours(c.clk.Now(), c.cfg.Grace, c.cfg.Lookback)
	var (
		mu     sync.Mutex
		report CompactReport
		errs   []error
	)
	if len(hours) == 0 {
		return report, nil
	}
	// List first, then merge: a listing that fails ends the run before
	// anything is written.
	type job struct {
		p    pipeline.LakePartition
		objs []ObjectInfo
	}
	var jobs []job
	for _, t := range pipeline.EventTypes {
		// One listing per day and type rather than per hour: a run over
		// two days is a handful of LIST calls.
		byHour, err := c.listDays(ctx, t, hours)
		if err != nil {
			return report, err
		}
		for _, h := range hours {
			jobs = append(jobs, job{pipeline.LakePartition{Type: t, Hour: h}, byHour[h]})
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.cfg.Concurrency)
	for _, j := range jobs {
		g.Go(func() error {
			r, err := c.compactPartition(gctx, j.p, j.objs)
			mu.Lock()
			defer mu.Unlock()
			report.add(r)
			if err != nil {
				report.Failed++
				errs = append(errs, err)
			}
			return nil
		})
	}
	_ = g.Wait()
	if cause := context.Cause(ctx); cause != nil {
		errs = append(errs, cause)
	}
	return report, errors.Join(errs...)
}

// CompactPartition compacts one partition-hour regardless of whether it is
// closed (the caller decides). Its contract is Run's, for one partition.
func (c *Compactor) CompactPartition(ctx context.Context, p pipeline.LakePartition) (CompactReport, error) {
	objs, err := c.list(ctx, c.partitionPrefix(p))
	if err != nil {
		return CompactReport{}, err
	}
	return c.compactPartition(ctx, p, objs)
}

func (c *Compactor) partitionPrefix(p pipeline.LakePartition) string {
	return normPrefix(c.cfg.EventsPrefix) + PartitionPath(p.Type, p.Hour)
}

// listDays lists the objects of type t on the days of hours and sorts them
// into those hours; objects of other hours are ignored.
func (c *Compactor) listDays(ctx context.Context, t pipeline.EventType, hours []time.Time) (map[time.Time][]ObjectInfo, error) {
	want := make(map[string]time.Time, len(hours)) // partition path -> hour
	var days []string
	for _, h := range hours {
		path := normPrefix(c.cfg.EventsPrefix) + PartitionPath(t, h)
		want[path] = h
		day := normPrefix(c.cfg.EventsPrefix) + fmt.Sprintf("event_type=%s/dt=%s/", t, h.Format(time.DateOnly))
		if !slices.Contains(days, day) {
			days = append(days, day)
		}
	}
	out := make(map[time.Time][]ObjectInfo)
	for _, day := range days {
		objs, err := c.list(ctx, day)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			i := strings.LastIndexByte(o.Key, '/')
			if h, ok := want[o.Key[:i+1]]; ok {
				out[h] = append(out[h], o)
			}
		}
	}
	return out, nil
}

// PlanCompaction groups a partition's objects into merges: Parquet objects
// in key order, except earlier outputs of at least half the target (they
// are finished), cut into groups whose sizes add up to at most target (a
// single larger object is a group of its own). Groups of one object are
// dropped: rewriting one object gains nothing. The plan depends only on
// the listing, so two runs that list the same objects plan the same
// outputs.
func PlanCompaction(objs []ObjectInfo, target int64) [][]ObjectInfo {
	var cands []ObjectInfo
	for _, o := range objs {
		name := o.Key[strings.LastIndexByte(o.Key, '/')+1:]
		if !strings.HasSuffix(name, ".parquet") {
			continue
		}
		if strings.HasPrefix(name, CompactedPrefix) && o.Size >= target/2 {
			continue
		}
		cands = append(cands, o)
	}
	slices.SortFunc(cands, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	var (
		groups [][]ObjectInfo
		cur    []ObjectInfo
		size   int64
	)
	for _, o := range cands {
		if len(cur) > 0 && size+o.Size > target {
			groups = append(groups, cur)
			cur, size = nil, 0
		}
		cur = append(cur, o)
		size += o.Size
	}
	if len(cur) > 0 {
		groups = append(groups, cur)
	}
	return slices.DeleteFunc(groups, func(g []ObjectInfo) bool { return len(g) < 2 })
}

// CompactedKey names the output of merging the objects under keys in the
// partition whose path is dir: the same inputs give the same name.
func CompactedKey(dir string, keys []string) string {
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	h := sha256.New()
	for _, k := range sorted {
		h.Write([]byte(k))
		h.Write([]byte{'\n'})
	}
	return dir + CompactedPrefix + hex.EncodeToString(h.Sum(nil))[:32] + ".parquet"
}

func (c *Compactor) compactPartition(ctx context.Context, p pipeline.LakePartition, objs []ObjectInfo) (CompactReport, error) {
	r := CompactReport{Partitions: 1, ObjectsBefore: len(objs), ObjectsAfter: len(objs)}
	groups := PlanCompaction(objs, c.cfg.TargetBytes)
	if len(groups) == 0 {
		return r, nil
	}
	dir := c.partitionPrefix(p)
	var earlier map[string]struct{}
	if !c.cfg.DryRun {
		var err error
		if earlier, err = c.previousHourIDs(ctx, p); err != nil {
			return r, fmt.Errorf("s3lake: compact %s: %w", dir, err)
		}
	}
	var written, inputs []string
	for _, g := range groups {
		keys := make([]string, len(g))
		for i, o := range g {
			keys[i] = o.Key
			r.BytesIn += o.Size
		}
		out := CompactedKey(dir, keys)
		inputs = append(inputs, keys...)
		written = append(written, out)
		if c.cfg.DryRun {
			continue
		}
		rowsIn, body, rowsOut, err := c.merge(ctx, p.Type, keys, earlier)
		if errors.Is(err, ErrNotFound) {
			// Another run merged and deleted an input after we listed
			// it; what this run wrote so far duplicates rows the views
			// collapse, and the next run merges it.
			c.cfg.Logger.Info("compact: an input is gone (another run merged it); partition left to the next run", "partition", dir, "err", err)
			r.Skipped = 1
			r.ObjectsAfter = len(objs) + len(written) - 1 // at most: the other run deleted some
			return r, nil
		}
		if err != nil {
			return r, fmt.Errorf("s3lake: compact %s: %w", dir, err)
		}
		if err := c.do(ctx, func(ctx context.Context) error { return c.store.Put(ctx, out, body, ParquetContentType) }); err != nil {
			return r, fmt.Errorf("s3lake: compact %s: write: %w", dir, err)
		}
		r.RowsIn += rowsIn
		r.RowsOut += rowsOut
		r.BytesOut += int64(len(body))
	}
	r.ObjectsAfter = len(objs) - len(inputs) + len(written)
	r.Compacted = 1
	if c.cfg.DryRun {
		c.cfg.Logger.Info("compact: would merge", "partition", dir, "inputs", len(inputs), "outputs", len(written), "bytes_in", r.BytesIn)
		return r, nil
	}
	if c.cfg.AfterWrite != nil {
		c.cfg.AfterWrite(ctx, p, written)
	}
	// Every input's rows are now in a written output: deleting the inputs
	// loses nothing even if this run dies half way (the leftovers are
	// duplicates the views collapse and the next run merges).
	if err := c.do(ctx, func(ctx context.Context) error { return c.store.Delete(ctx, inputs) }); err != nil {
		return r, fmt.Errorf("s3lake: compact %s: delete merged objects: %w", dir, err)
	}
	c.cfg.Logger.Info("compact: merged", "partition", dir, "objects_before", r.ObjectsBefore, "objects_after", r.ObjectsAfter,
		"rows_in", r.RowsIn, "rows_out", r.RowsOut, "bytes_in", r.BytesIn, "bytes_out", r.BytesOut)
	return r, nil
}

// merge reads the objects under keys and encodes their rows as one object:
// each event id once (its earliest received copy, as the _dedup views
// choose; on a tie the copy in the first key), in the consumer's row order,
// leaving out ids in earlier (the previous hour has them already).
func (c *Compactor) merge(ctx context.Context, t pipeline.EventType, keys []string, earlier map[string]struct{}) (rowsIn int, body []byte, rowsOut int, err error) {
	best := make(map[string]int) // event id -> index in recs
	var recs []pipeline.LakeRecord
	for _, k := range slices.Sorted(slices.Values(keys)) {
		var data []byte
		if err := c.do(ctx, func(ctx context.Context) error {
			var err error
			data, err = c.store.Get(ctx, k)
			return err
		}); err != nil {
			return 0, nil, 0, fmt.Errorf("read %s: %w", k, err)
		}
		got, err := ReadRecords(t, data)
		if err != nil {
			return 0, nil, 0, fmt.Errorf("read %s: %w", k, err)
		}
		rowsIn += len(got)
		for _, rec := range got {
			if _, dup := earlier[rec.EventID]; dup {
				continue
			}
			i, seen := best[rec.EventID]
			switch {
			case !seen:
				best[rec.EventID] = len(recs)
				recs = append(recs, rec)
			case rec.ReceivedAt.Before(recs[i].ReceivedAt):
				recs[i] = rec
			}
		}
	}
	var buf bytes.Buffer
	if err := EncodeParquet(&buf, t, recs); err != nil {
		return 0, nil, 0, err
	}
	return rowsIn, buf.Bytes(), len(recs), nil
}

// previousHourIDs returns the event ids in the partition an hour before p.
//
// The _dedup views collapse copies of an event within one partition-hour
// only (partitioning the window by dt and hour keeps partition pruning
// working through the views). A review retried or taken over after a crash
// re-emits its events with the same ids (pipeline/eventid.go) but a later
// occurred_at, which may fall in the next hour; such a copy is the later
// one, so compacting the later hour drops it. Copies more than an hour
// apart are left (the rerun would have to outlive a claim TTL and several
// retries), and so are copies in an hour compaction does not rewrite.
func (c *Compactor) previousHourIDs(ctx context.Context, p pipeline.LakePartition) (map[string]struct{}, error) {
	prev := pipeline.LakePartition{Type: p.Type, Hour: p.Hour.Add(-time.Hour)}
	// A run compacting that hour at the same time may delete what we
	// listed; its output holds the same ids, so list again. After a few
	// tries the ids read so far serve: a missed id keeps a copy, which is
	// safe.
	ids := make(map[string]struct{})
	for try := 0; try < 3; try++ {
		objs, err := c.list(ctx, c.partitionPrefix(prev))
		if err != nil {
			return nil, err
		}
		gone := false
		for _, o := range objs {
			if !strings.HasSuffix(o.Key, ".parquet") {
				continue
			}
			var data []byte
			err := c.do(ctx, func(ctx context.Context) error {
				var err error
				data, err = c.store.Get(ctx, o.Key)
				return err
			})
			if errors.Is(err, ErrNotFound) {
				gone = true
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", o.Key, err)
			}
			rows, err := ReadRows[eventIDRow](data)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", o.Key, err)
			}
			for _, r := range rows {
				ids[r.EventID] = struct{}{}
			}
		}
		if !gone {
			break
		}
	}
	return ids, nil
}

// eventIDRow reads only the event_id column of any lake table.
type eventIDRow struct {
	EventID string `parquet:"event_id"`
}

// do runs one S3 call under the retry policy; a *pipeline.PermanentError
// is not retried.
func (c *Compactor) do(ctx context.Context, op func(context.Context) error) error {
	return retry.Do(ctx, c.cfg.Retry, retry.Options{Clock: c.clk, Retryable: func(err error) bool {
		var perm *pipeline.PermanentError
		return !errors.As(err, &perm)
	}}, op)
}

func (c *Compactor) list(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	var objs []ObjectInfo
	err := c.do(ctx, func(ctx context.Context) error {
		var err error
		objs, err = c.store.ListObjects(ctx, prefix)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("s3lake: compact: list %s: %w", prefix, err)
	}
	return objs, nil
}

// ReadRecords decodes a Parquet object of event type t back into lake
// records (received_at included), for compaction and for tools that read
// the lake.
func ReadRecords(t pipeline.EventType, data []byte) ([]pipeline.LakeRecord, error) {
	switch t {
	case pipeline.EventInferenceLog:
		return readRecords[InferenceLogRow](data)
	case pipeline.EventModeratorFeedback:
		return readRecords[ModeratorFeedbackRow](data)
	case pipeline.EventVerdict:
		return readRecords[VerdictRow](data)
	case pipeline.EventShadowVerdict:
		return readRecords[ShadowVerdictRow](data)
	case pipeline.EventProtectiveAction:
		return readRecords[ActionRow](data)
	}
	return nil, fmt.Errorf("s3lake: read: unknown event type %q", t)
}

type recordRow interface {
	LakeEvent() pipeline.LakeEvent
	receivedAt() time.Time
}

func (r InferenceLogRow) receivedAt() time.Time      { return r.ReceivedAt }
func (r ModeratorFeedbackRow) receivedAt() time.Time { return r.ReceivedAt }
func (r VerdictRow) receivedAt() time.Time           { return r.ReceivedAt }

func readRecords[T recordRow](data []byte) ([]pipeline.LakeRecord, error) {
	rows, err := ReadRows[T](data)
	if err != nil {
		return nil, err
	}
	out := make([]pipeline.LakeRecord, len(rows))
	for i, r := range rows {
		out[i] = pipeline.LakeRecord{LakeEvent: r.LakeEvent(), ReceivedAt: r.receivedAt().UTC()}
	}
	return out, nil
}
