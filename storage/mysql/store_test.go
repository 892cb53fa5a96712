package mysql_test

import (
	"context"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/migrations"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/storetest"
)

func setup(t *testing.T) *mysql.Store {
	t.Helper()
	db, _ := stacktest.MySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := migrations.Up(ctx, db)
	require.NoError(t, err)
	return mysql.New(db)
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.RunVerdictStoreConformance(t, func(t *testing.T) pipeline.VerdictStore { return setup(t) })
}

func TestReviserConformance(t *testing.T) {
	t.Parallel()
	storetest.RunVerdictReviserConformance(t, func(t *testing.T) pipeline.VerdictReviser { return setup(t) })
}

func TestSaveRejectsWhatTheSchemaCannotHold(t *testing.T) {
	t.Parallel()
	s := setup(t)
	tests := []struct {
		name string
		mut  func(*pipeline.Verdict)
	}{
		{"unknown status", func(v *pipeline.Verdict) { v.Status = "maybe" }},
		{"long room id", func(v *pipeline.Verdict) { v.Key.RoomID = string(make([]byte, 129)) }},
		{"no pipeline version", func(v *pipeline.Verdict) { v.Key.PipelineVersion = "" }},
		{"stage output not JSON", func(v *pipeline.Verdict) { v.Stages[0].Output = []byte("{") }},
		{"repeated stage", func(v *pipeline.Verdict) { v.Stages[1].Stage = v.Stages[0].Stage }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := storetest.SampleVerdict("room-bad")
			tc.mut(&v)
			_, err := s.Save(context.Background(), v)
			require.Error(t, err)
			d, _ := pipeline.Classify(err)
			require.Equal(t, pipeline.GiveUp, d)
		})
	}
}

// TestServerRejectionsArePermanent sends values that pass the store's own
// checks but not the schema, so the rejection is the server's: a real
// *mysql.MySQLError through the driver, mapped by its number.
func TestServerRejectionsArePermanent(t *testing.T) {
	t.Parallel()
	stacktest.RequireRealMySQL(t)
	s := setup(t)
	tests := []struct {
		name   string
		mut    func(*pipeline.Verdict)
		number uint16
	}{
		{"run id longer than its column", func(v *pipeline.Verdict) { v.RunID = strings.Repeat("r", 129) }, 1406},
		{"negative tokens", func(v *pipeline.Verdict) { v.Stages[0].TokensIn = -1 }, 1264},
		{"model longer than its column", func(v *pipeline.Verdict) { v.Stages[1].Model = strings.Repeat("m", 129) }, 1406},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := storetest.SampleVerdict("room-" + strings.ReplaceAll(tc.name, " ", "-"))
			tc.mut(&v)
			_, err := s.Save(context.Background(), v)
			var me *gomysql.MySQLError
			require.ErrorAs(t, err, &me, "want the server's error, got %v", err)
			require.Equal(t, tc.number, me.Number)
			d, _ := pipeline.Classify(err)
			require.Equal(t, pipeline.GiveUp, d)
			_, err = s.Get(context.Background(), v.Key)
			require.ErrorIs(t, err, pipeline.ErrVerdictNotFound, "the transaction left nothing behind")
		})
	}
}

func TestPingAndTotals(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	require.NoError(t, s.Ping(ctx))
	v := storetest.SampleVerdict("room-totals")
	storetest.MustSave(t, ctx, s, v)
	var pools string
	var fallback bool
	var tin, tout int
	var lat float64
	require.NoError(t, s.DB().QueryRowContext(ctx,
		"SELECT pools_used, fallback_used, tokens_in, tokens_out, latency_ms FROM verdicts WHERE room_id = ?", "room-totals").
		Scan(&pools, &fallback, &tin, &tout, &lat))
	require.Equal(t, "primary,fallback", pools)
	require.True(t, fallback)
	require.Equal(t, 4006, tin)
	require.Equal(t, 406, tout)
	require.InDelta(t, float64(v.FinishedAt.Sub(v.StartedAt))/1e6, lat, 0.001)
}
