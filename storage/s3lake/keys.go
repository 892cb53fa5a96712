package s3lake

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// Default key prefixes inside the lake bucket. The Athena tables point at
// <bucket>/events/event_type=<t>/ so EventsPrefix must not change lightly.
const (
	DefaultEventsPrefix = "events/"
	DefaultErrorsPrefix = "errors/"
)

// PartitionPath returns the Hive partition path of an event type and hour,
// "event_type=<t>/dt=YYYY-MM-DD/hour=HH/".
func PartitionPath(t pipeline.EventType, hour time.Time) string {
	return fmt.Sprintf("event_type=%s/%s", t, hourPath(hour))
}

func hourPath(hour time.Time) string {
	hour = hour.UTC()
	return fmt.Sprintf("dt=%s/hour=%02d/", hour.Format(time.DateOnly), hour.Hour())
}

// batchHash names a batch by its members: the same members give the same
// name however they were ordered, so a retried flush of the same batch
// overwrites its object instead of adding a duplicate.
func batchHash(ids []string) string {
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	h := sha256.New()
	for _, id := range sorted {
		h.Write([]byte(id))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// ObjectKey returns the key of the Parquet object holding a batch of events
// of type t in the given hour: prefix + partition path + a name derived from
// the ids of the batch's members.
func ObjectKey(prefix string, t pipeline.EventType, hour time.Time, ids []string) string {
	return normPrefix(prefix) + PartitionPath(t, hour) + "part-" + batchHash(ids) + ".parquet"
}

// ErrorKey returns the key of the JSON-lines object holding a batch of
// invalid messages received in the given hour.
func ErrorKey(prefix string, hour time.Time, ids []string) string {
	return normPrefix(prefix) + hourPath(hour) + "invalid-" + batchHash(ids) + ".jsonl"
}

func normPrefix(p string) string {
	if p != "" && !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p
}

// EncodeErrors renders error lines as JSON lines, in message-id order so
// that a retried flush writes identical bytes.
func EncodeErrors(lines []pipeline.LakeErrorLine) ([]byte, error) {
	sorted := slices.Clone(lines)
	slices.SortFunc(sorted, func(a, b pipeline.LakeErrorLine) int { return strings.Compare(a.MessageID, b.MessageID) })
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, l := range sorted {
		l.ReceivedAt = l.ReceivedAt.UTC()
		if err := enc.Encode(l); err != nil {
			return nil, fmt.Errorf("s3lake: encode error line: %w", err)
		}
	}
	return buf.Bytes(), nil
}

// DecodeErrors parses an errors/ object back into lines.
func DecodeErrors(data []byte) ([]pipeline.LakeErrorLine, error) {
	var out []pipeline.LakeErrorLine
	dec := json.NewDecoder(bytes.NewReader(data))
	for dec.More() {
		var l pipeline.LakeErrorLine
		if err := dec.Decode(&l); err != nil {
			return nil, fmt.Errorf("s3lake: decode error line: %w", err)
		}
		out = append(out, l)
	}
	return out, nil
}
