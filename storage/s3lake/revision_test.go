package s3lake_test

import (
	"bytes"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/s3lake"
	"github.com/chatguard/chatguard/storage/s3lake/s3laketest"
)

// TestVerdictRevisionRoundTripAndRefuseNegative: a verdict event's
// revision goes to Parquet's revision column and reads back equal; an
// event without one (revision 1, and every event from before revisions)
// is a null column, as are files written before it; a negative revision is
// invalid (errors/).
func TestVerdictRevisionRoundTripAndRefuseNegative(t *testing.T) {
	t.Parallel()
	var ev pipeline.LakeEvent
	for _, e := range s3laketest.Events(12, 1, t0, 3) {
		if e.EventType == pipeline.EventVerdict {
			ev = e
			break
		}
	}
	v := ev.Payload.(pipeline.VerdictEvent)
	for _, rev := range []int{0, 2, 7} {
		v.Revision = rev
		ev.Payload = v
		rec, err := pipeline.DecodeLakeEvent(s3laketest.Body(t, ev), t0)
		require.NoError(t, err)
		var buf bytes.Buffer
		require.NoError(t, s3lake.EncodeParquet(&buf, pipeline.EventVerdict, []pipeline.LakeRecord{rec}))
		rows, err := s3lake.ReadRows[s3lake.VerdictRow](buf.Bytes())
		require.NoError(t, err)
		require.Equal(t, int32(rev), rows[0].Revision)
		require.Equal(t, rev, rows[0].LakeEvent().Payload.(pipeline.VerdictEvent).Revision)
	}
	body := s3laketest.Body(t, ev)
	require.Contains(t, string(body), `"revision":7`)

	v.Revision = -1
	ev.Payload = v
	_, err := pipeline.DecodeLakeEvent(s3laketest.Body(t, ev), t0)
	var inv *pipeline.InvalidLakeEventError
	require.ErrorAs(t, err, &inv)
	require.Contains(t, err.Error(), "revision")

	var old bytes.Buffer
	require.NoError(t, parquet.Write(&old, []oldVerdictRow{{EventID: "e1", EventType: "verdict", RoomID: "r1", Status: "done", WindowEnd: t0}}))
	oldRows, err := s3lake.ReadRows[s3lake.VerdictRow](old.Bytes())
	require.NoError(t, err)
	require.Zero(t, oldRows[0].Revision)
}
