package mysql

import (
	"context"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/chatguard/chatguard/internal/stacktest"
)

// TestMySQLSpansRecordNoStatement runs statements through a traced pool:
// under a sampled span each call is a child span that records neither the
// statement nor its arguments (they carry room ids); outside any span
// there is none.
func TestMySQLSpansRecordNoStatement(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	_, dsn := stacktest.MySQL(t)
	dc, err := gomysql.ParseDSN(dsn)
	require.NoError(t, err)
	dc.InterpolateParams = true
	conn, err := gomysql.NewConnector(dc)
	require.NoError(t, err)
	db := tracedDB(conn, tp)
	defer db.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = db.ExecContext(ctx, "CREATE TABLE secret_rooms (room_id VARCHAR(64))")
	require.NoError(t, err, "untraced")
	tctx, root := tp.Tracer("test").Start(ctx, "root")
	_, err = db.ExecContext(tctx, "INSERT INTO secret_rooms VALUES (?)", "room-secret-42")
	require.NoError(t, err)
	var got string
	require.NoError(t, db.QueryRowContext(tctx, "SELECT room_id FROM secret_rooms WHERE room_id = ?", "room-secret-42").Scan(&got))
	root.End()

	spans := 0
	for _, s := range rec.Ended() {
		if s.Name() == "root" {
			continue
		}
		spans++
		require.Equal(t, root.SpanContext().TraceID(), s.SpanContext().TraceID(), "%s belongs to the caller's trace", s.Name())
		require.NotContains(t, s.Name(), "secret")
		for _, kv := range s.Attributes() {
			v := kv.Value.String()
			require.False(t, strings.Contains(v, "secret") || strings.Contains(strings.ToUpper(v), "SELECT") || strings.Contains(strings.ToUpper(v), "INSERT"),
				"%s: attribute %s=%q holds the statement or an argument", s.Name(), kv.Key, v)
		}
	}
	require.GreaterOrEqual(t, spans, 2, "the traced insert and select are spans; the untraced create is none")
	require.LessOrEqual(t, spans, 3)
}
