package sqs_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline/queuetest"
	"github.com/chatguard/chatguard/storage/sqs"
)

// TestConformance runs the queue conformance suite against the local
// stack's SQS (fauxqs); pipeline/queuetest runs it against the fake.
func TestConformance(t *testing.T) {
	t.Parallel()
	client := stacktest.SQS(t)
	open := func(t *testing.T, url string) *sqs.Queue {
		cfg := sqs.DefaultConfig()
		cfg.URL = url
		q, err := sqs.New(client, cfg)
		require.NoError(t, err)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, q.Close(ctx))
		})
		return q
	}
	queuetest.Run(t, func(t *testing.T, maxReceive int) queuetest.Backend {
		q := stacktest.NewQueue(t, "conformance", maxReceive, 30*time.Second)
		return queuetest.Backend{Queue: open(t, q.URL), DLQ: open(t, q.DLQURL), MaxReceive: maxReceive}
	})
}
