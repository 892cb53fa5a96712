package s3lake_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/s3lake"
	"github.com/chatguard/chatguard/storage/s3lake/s3laketest"
)

// oldVerdictRow is the verdict row as files written before subjects had:
// no subjects column.
type oldVerdictRow struct {
	EventID   string    `parquet:"event_id"`
	EventType string    `parquet:"event_type,dict"`
	RoomID    string    `parquet:"room_id"`
	Status    string    `parquet:"status,dict"`
	Label     string    `parquet:"label,optional,dict"`
	Severity  int32     `parquet:"severity"`
	WindowEnd time.Time `parquet:"window_end,timestamp(millisecond)"`
}

// TestVerdictFilesWithoutSubjectsStillRead: compaction and the Athena
// stand-in read old files with the new row type; the missing column is
// no subjects.
func TestVerdictFilesWithoutSubjectsStillRead(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	require.NoError(t, parquet.Write(&buf, []oldVerdictRow{{EventID: "e1", EventType: "verdict", RoomID: "r1", Status: "done", Label: "abusive", Severity: 4, WindowEnd: t0}}))
	rows, err := s3lake.ReadRows[s3lake.VerdictRow](buf.Bytes())
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, "r1", rows[0].RoomID)
	require.Empty(t, rows[0].Subjects)
	require.Nil(t, rows[0].LakeEvent().Payload.(pipeline.VerdictEvent).Subjects)
}

// TestVerdictEventsRefuseRawSubjects: an event whose subjects are not keyed
// pseudonyms is invalid (it goes to the errors partition), so a raw sender
// id never lands in the verdict table, whoever wrote the event.
func TestVerdictEventsRefuseRawSubjects(t *testing.T) {
	t.Parallel()
	ev := s3laketest.Events(3, 1, t0, 3)[2]
	require.Equal(t, pipeline.EventVerdict, ev.EventType)
	require.NotEmpty(t, ev.Payload.(pipeline.VerdictEvent).Subjects, "the generator gives this verdict subjects")
	v := ev.Payload.(pipeline.VerdictEvent)
	for _, tc := range []struct {
		subjects []string
		ok       bool
	}{
		{[]string{"hmac:0123456789abcdef01234567"}, true},
		{[]string{"hmac-dev:0123456789abcdef01234567"}, true},
		{[]string{"seller-8812"}, false},
		{[]string{"hmac:seller-8812"}, false},
		{[]string{"hmac:0123456789ABCDEF01234567"}, false},
		{[]string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}, false},
	} {
		v.Subjects = tc.subjects
		ev.Payload = v
		_, err := pipeline.DecodeLakeEvent(s3laketest.Body(t, ev), t0)
		if tc.ok {
			require.NoError(t, err, tc.subjects)
		} else {
			var inv *pipeline.InvalidLakeEventError
			require.ErrorAs(t, err, &inv, tc.subjects)
			require.NotContains(t, err.Error(), "8812", "the reason never echoes the value")
		}
	}
}

// TestVerdictCampaignsRoundTripAndRefuseRawValues: campaign signals go to
// Parquet as a JSON array and read back; an event whose marks are not
// keyed pseudonyms, or of an unknown kind, is invalid (errors/), and the
// reason never echoes the value. Old files read as none.
func TestVerdictCampaignsRoundTripAndRefuseRawValues(t *testing.T) {
	t.Parallel()
	ev := s3laketest.Events(3, 1, t0, 3)[2]
	v := ev.Payload.(pipeline.VerdictEvent)
	require.NotEmpty(t, v.Campaigns, "the generator gives this verdict campaign signals")
	rec, err := pipeline.DecodeLakeEvent(s3laketest.Body(t, ev), t0)
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, s3lake.EncodeParquet(&buf, pipeline.EventVerdict, []pipeline.LakeRecord{rec}))
	rows, err := s3lake.ReadRows[s3lake.VerdictRow](buf.Bytes())
	require.NoError(t, err)
	require.JSONEq(t, `[{"kind":"script","mark":"`+v.Campaigns[0].Mark+`","rooms":`+fmt.Sprint(v.Campaigns[0].Rooms)+`,"senders":`+fmt.Sprint(v.Campaigns[0].Senders)+`}]`, rows[0].Campaigns)
	require.Equal(t, v.Campaigns, rows[0].LakeEvent().Payload.(pipeline.VerdictEvent).Campaigns)

	for _, bad := range []pipeline.VerdictCampaign{
		{Kind: pipeline.CampaignContact, Mark: "01012345678", Rooms: 9, Senders: 1},
		{Kind: "text", Mark: "hmac:0123456789abcdef01234567", Rooms: 9, Senders: 1},
	} {
		v.Campaigns = []pipeline.VerdictCampaign{bad}
		ev.Payload = v
		_, err := pipeline.DecodeLakeEvent(s3laketest.Body(t, ev), t0)
		var inv *pipeline.InvalidLakeEventError
		require.ErrorAs(t, err, &inv)
		require.NotContains(t, err.Error(), "12345678")
	}

	var old bytes.Buffer
	require.NoError(t, parquet.Write(&old, []oldVerdictRow{{EventID: "e1", EventType: "verdict", RoomID: "r1", Status: "done", WindowEnd: t0}}))
	oldRows, err := s3lake.ReadRows[s3lake.VerdictRow](old.Bytes())
	require.NoError(t, err)
	require.Nil(t, oldRows[0].LakeEvent().Payload.(pipeline.VerdictEvent).Campaigns)
}
