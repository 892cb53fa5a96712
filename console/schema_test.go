package console

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/migrations"
)

func TestCheckSchemaRefusesAnUnmigratedDatabase(t *testing.T) {
	db, _ := stacktest.MySQL(t)
	ctx := testCtx(t)
	require.ErrorContains(t, CheckSchema(ctx, db, 10*time.Second), "run 'worker migrate'")
	_, err := migrations.Up(ctx, db)
	require.NoError(t, err)
	require.NoError(t, CheckSchema(ctx, db, 10*time.Second))
}
