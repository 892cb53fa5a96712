package s3lake

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// Putter is where a Lake writes its objects: Store, or an in-memory store
// in tests. Put returning nil means the object is durably written; a second
// Put of the same key replaces it.
type Putter interface {
	Put(ctx context.Context, key string, body []byte, contentType string) error
}

// Content types of the lake's objects.
const (
	ParquetContentType = "application/vnd.apache.parquet"
	ErrorsContentType  = "application/x-ndjson"
)

// Lake is the lake's pipeline.LakeWriter: events as typed Parquet under
// <events prefix>event_type=<t>/dt=YYYY-MM-DD/hour=HH/, invalid messages as
// JSON lines under <errors prefix>dt=YYYY-MM-DD/hour=HH/, written to a
// Putter. It holds no state beyond its configuration and is safe for
// concurrent use.
type Lake struct {
	store        Putter
	eventsPrefix string
	errorsPrefix string
}

var _ pipeline.LakeWriter = (*Lake)(nil)

// ValidatePrefixes reports prefixes that would mix events and invalid
// messages under one another, naming them as cmd/consumer's flags.
func ValidatePrefixes(eventsPrefix, errorsPrefix string) error {
	if eventsPrefix == errorsPrefix || strings.HasPrefix(eventsPrefix, errorsPrefix) || strings.HasPrefix(errorsPrefix, eventsPrefix) {
		return fmt.Errorf("lake-prefix %q and errors-prefix %q must not overlap", eventsPrefix, errorsPrefix)
	}
	return nil
}

// NewLake returns a Lake writing to store under the given prefixes
// (DefaultEventsPrefix and DefaultErrorsPrefix unless there is a reason),
// or the prefixes' problem.
func NewLake(store Putter, eventsPrefix, errorsPrefix string) (*Lake, error) {
	if store == nil {
		return nil, errors.New("s3lake: lake: no store")
	}
	if err := ValidatePrefixes(eventsPrefix, errorsPrefix); err != nil {
		return nil, fmt.Errorf("s3lake: %w", err)
	}
	return &Lake{store: store, eventsPrefix: eventsPrefix, errorsPrefix: errorsPrefix}, nil
}

// EncodeEvents implements pipeline.LakeWriter: one Parquet object of
// partition p, named after msgIDs. It fails, always the same way, when an
// event does not belong to p or p is the errors partition.
func (l *Lake) EncodeEvents(p pipeline.LakePartition, msgIDs []string, events []pipeline.LakeRecord) (pipeline.LakeObject, error) {
	if p.IsErrors() {
		return pipeline.LakeObject{}, errors.New("s3lake: encode: events for the errors partition")
	}
	var buf bytes.Buffer
	if err := EncodeParquet(&buf, p.Type, events); err != nil {
		return pipeline.LakeObject{}, err
	}
	return pipeline.LakeObject{Key: ObjectKey(l.eventsPrefix, p.Type, p.Hour, msgIDs), Body: buf.Bytes(), ContentType: ParquetContentType}, nil
}

// EncodeErrors implements pipeline.LakeWriter: one JSON-lines object of the
// invalid messages received in hour, named after their message ids.
func (l *Lake) EncodeErrors(hour time.Time, lines []pipeline.LakeErrorLine) (pipeline.LakeObject, error) {
	body, err := EncodeErrors(lines)
	if err != nil {
		return pipeline.LakeObject{}, err
	}
	ids := make([]string, len(lines))
	for i, ln := range lines {
		ids[i] = ln.MessageID
	}
	return pipeline.LakeObject{Key: ErrorKey(l.errorsPrefix, hour, ids), Body: body, ContentType: ErrorsContentType}, nil
}

// Put implements pipeline.LakeWriter by writing o to the store; its errors
// are the store's.
func (l *Lake) Put(ctx context.Context, o pipeline.LakeObject) error {
	return l.store.Put(ctx, o.Key, o.Body, o.ContentType)
}
