package s3lake_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/s3lake"
	"github.com/chatguard/chatguard/storage/s3lake/s3laketest"
)

// putRecorder keeps the last object put.
type putRecorder struct{ key, ctype string }

func (p *putRecorder) Put(_ context.Context, key string, _ []byte, ctype string) error {
	p.key, p.ctype = key, ctype
	return nil
}

func TestNewLakeRejectsOverlappingPrefixes(t *testing.T) {
	t.Parallel()
	_, err := s3lake.NewLake(&putRecorder{}, "lake/", "lake/errors/")
	require.ErrorContains(t, err, "must not overlap")
	_, err = s3lake.NewLake(nil, "events/", "errors/")
	require.Error(t, err)
}

func TestLakeEncodesUnderItsPrefixes(t *testing.T) {
	t.Parallel()
	rec := &putRecorder{}
	l, err := s3lake.NewLake(rec, "events/", "errors/")
	require.NoError(t, err)
	evs := decodeAll(t, s3laketest.Events(1, 11, t0, 1))
	p := pipeline.NewLakePartition(evs[0].EventType, evs[0].OccurredAt)
	obj, err := l.EncodeEvents(p, []string{"m2", "m1"}, evs)
	require.NoError(t, err)
	require.Equal(t, s3lake.ObjectKey("events/", p.Type, p.Hour, []string{"m1", "m2"}), obj.Key, "named after the messages, in any order")
	require.NoError(t, l.Put(context.Background(), obj))
	require.Equal(t, obj.Key, rec.key)
	require.Equal(t, s3lake.ParquetContentType, rec.ctype)

	_, err = l.EncodeEvents(pipeline.NewLakePartition("", t0), []string{"m1"}, evs)
	require.Error(t, err, "events never go to the errors partition")
	other := pipeline.EventVerdict
	if p.Type == other {
		other = pipeline.EventInferenceLog
	}
	_, err = l.EncodeEvents(pipeline.NewLakePartition(other, t0), []string{"m1"}, evs)
	require.Error(t, err, "an event of another type is refused, not written")

	lines := []pipeline.LakeErrorLine{{MessageID: "m9", ReceivedAt: now, Reason: "bad", Body: "{"}}
	obj, err = l.EncodeErrors(pipeline.LakeHour(now), lines)
	require.NoError(t, err)
	require.Equal(t, s3lake.ErrorKey("errors/", pipeline.LakeHour(now), []string{"m9"}), obj.Key)
	require.Equal(t, s3lake.ErrorsContentType, obj.ContentType)
	back, err := s3lake.DecodeErrors(obj.Body)
	require.NoError(t, err)
	require.Equal(t, "bad", back[0].Reason)
}
