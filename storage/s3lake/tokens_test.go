package s3lake_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/storage/s3lake"
)

// oldInferenceLogRow is InferenceLogRow as it was before token accounting:
// files written then lack tokens_cached and cost_usd.
type oldInferenceLogRow struct {
	EventID    string    `parquet:"event_id"`
	EventType  string    `parquet:"event_type,dict"`
	OccurredAt time.Time `parquet:"occurred_at,timestamp(millisecond)"`
	Stage      string    `parquet:"stage,dict"`
	TokensIn   int32     `parquet:"tokens_in"`
	TokensOut  int32     `parquet:"tokens_out"`
}

func TestOldInferenceLogFilesReadWithoutTokenAccounting(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	at := time.Date(2026, 11, 1, 3, 0, 0, 0, time.UTC)
	require.NoError(t, parquet.Write(&buf, []oldInferenceLogRow{{EventID: "e1", EventType: "inference_log", OccurredAt: at, Stage: "judge", TokensIn: 900, TokensOut: 80}}))
	rows, err := s3lake.ReadRows[s3lake.InferenceLogRow](buf.Bytes())
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, int32(900), rows[0].TokensIn)
	require.Zero(t, rows[0].TokensCached)
	require.Zero(t, rows[0].CostUSD)

	buf.Reset()
	require.NoError(t, parquet.Write(&buf, []s3lake.InferenceLogRow{{EventID: "e2", EventType: "inference_log", OccurredAt: at, Stage: "judge", TokensIn: 900, TokensCached: 880, CostUSD: 0.0012}}))
	rows, err = s3lake.ReadRows[s3lake.InferenceLogRow](buf.Bytes())
	require.NoError(t, err)
	require.Equal(t, int32(880), rows[0].TokensCached)
	require.InDelta(t, 0.0012, rows[0].CostUSD, 1e-15)
}
