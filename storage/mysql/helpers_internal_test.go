package mysql

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/migrations"
)

// migrated returns a fresh, migrated database and a store over it.
func migrated(t *testing.T) (*sql.DB, *Store) {
	t.Helper()
	db, _ := stacktest.MySQL(t)
	_, err := migrations.Up(ctxT(t), db)
	require.NoError(t, err)
	return db, New(db)
}

// ctxT is a bounded context for one test.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// generated returns a migrated database holding n generated verdicts over
// 30 days before end.
func generated(t *testing.T, n int, end time.Time) (*sql.DB, *Store, genStats) {
	t.Helper()
	db, s := migrated(t)
	st, err := generate(ctxT(t), db, genSpec{Verdicts: n, Days: 30, End: end, Seed: 7, DecidedShare: 0.1, Workers: 2})
	require.NoError(t, err)
	return db, s, st
}
