package s3lake_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/s3lake"
	"github.com/chatguard/chatguard/storage/s3lake/s3laketest"
)

// TestVerdictAccountHistoryRoundTripAndRefuseBadLines: the account history
// a review was shown goes to Parquet as JSON in account_history and reads
// back equal; an event whose history names an unknown status, a role other
// than buyer or seller, an unknown label or a negative count is invalid
// (errors/), and a field the history does not have (a sender id smuggled
// in) is refused as unknown. Files written before the column read as none.
func TestVerdictAccountHistoryRoundTripAndRefuseBadLines(t *testing.T) {
	t.Parallel()
	evs := s3laketest.Events(12, 1, t0, 3)
	ev := evs[2]
	v := ev.Payload.(pipeline.VerdictEvent)
	require.NotNil(t, v.AccountHistory, "the generator gives this verdict a history")
	require.NotEmpty(t, v.AccountHistory.Lines)
	rec, err := pipeline.DecodeLakeEvent(s3laketest.Body(t, ev), t0)
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, s3lake.EncodeParquet(&buf, pipeline.EventVerdict, []pipeline.LakeRecord{rec}))
	rows, err := s3lake.ReadRows[s3lake.VerdictRow](buf.Bytes())
	require.NoError(t, err)
	want, err := json.Marshal(v.AccountHistory)
	require.NoError(t, err)
	require.JSONEq(t, string(want), rows[0].AccountHistory)
	require.Contains(t, rows[0].AccountHistory, `"overturned":true`)
	require.Equal(t, v.AccountHistory, rows[0].LakeEvent().Payload.(pipeline.VerdictEvent).AccountHistory)

	line := v.AccountHistory.Lines[0]
	for name, bad := range map[string]pipeline.HistorySeen{
		"status":   {Status: "maybe", Days: 30},
		"role":     {Status: pipeline.HistoryOK, Days: 30, Lines: []pipeline.HistoryCount{{Role: "victim", Label: line.Label, Rooms: 1}}},
		"label":    {Status: pipeline.HistoryOK, Days: 30, Lines: []pipeline.HistoryCount{{Role: line.Role, Label: "01012345678", Rooms: 1}}},
		"category": {Status: pipeline.HistoryOK, Days: 30, Lines: []pipeline.HistoryCount{{Role: line.Role, Label: line.Label, Category: "kakao", Rooms: 1}}},
		"negative": {Status: pipeline.HistoryOK, Days: 30, Lines: []pipeline.HistoryCount{{Role: line.Role, Label: line.Label, Rooms: -1}}},
		"too many": {Status: pipeline.HistoryOK, Days: 30, Lines: make([]pipeline.HistoryCount, pipeline.MaxHistoryLines+1)},
	} {
		v.AccountHistory = &bad
		ev.Payload = v
		_, err := pipeline.DecodeLakeEvent(s3laketest.Body(t, ev), t0)
		var inv *pipeline.InvalidLakeEventError
		require.ErrorAs(t, err, &inv, name)
		require.Contains(t, err.Error(), "account_history", name)
	}

	// A history with a field of its own (say, the sender ids it was
	// about) is not a history this build knows: refused, not dropped.
	v.AccountHistory = nil
	ev.Payload = v
	body := s3laketest.Body(t, ev)
	smuggled := bytes.Replace(body, []byte(`"payload":{`), []byte(`"payload":{"account_history":{"status":"ok","days":30,"lines":[],"sender_ids":["u-1"]},`), 1)
	require.NotEqual(t, body, smuggled)
	_, err = pipeline.DecodeLakeEvent(smuggled, t0)
	var inv *pipeline.InvalidLakeEventError
	require.ErrorAs(t, err, &inv)

	var old bytes.Buffer
	require.NoError(t, parquet.Write(&old, []oldVerdictRow{{EventID: "e1", EventType: "verdict", RoomID: "r1", Status: "done", WindowEnd: t0}}))
	oldRows, err := s3lake.ReadRows[s3lake.VerdictRow](old.Bytes())
	require.NoError(t, err)
	require.Nil(t, oldRows[0].LakeEvent().Payload.(pipeline.VerdictEvent).AccountHistory)
}
