package demo

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPrintTraceIndentsChildrenWithDurationsAndTokens prints a review's
// trace: children under their parent in start order, each with its
// service, duration and tokens; a span whose parent was not received is a
// root; OneReview picks the trace with the most model attempts.
func TestPrintTraceIndentsChildrenWithDurationsAndTokens(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 4, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	spans := []TraceSpan{
		{Service: "chatguard-worker", Name: "stage judge", TraceID: "a", SpanID: "4", Parent: "2", Start: at(300), End: at(700),
			Attrs: map[string]string{"gen_ai.usage.input_tokens": "900", "gen_ai.usage.output_tokens": "120"}},
		{Service: "chatguard-batch", Name: "review publish", TraceID: "a", SpanID: "1", Start: at(0), End: at(5)},
		{Service: "chatguard-worker", Name: "job", TraceID: "a", SpanID: "2", Parent: "1", Start: at(10), End: at(800)},
		{Service: "chatguard-worker", Name: "stage triage", TraceID: "a", SpanID: "3", Parent: "2", Start: at(20), End: at(250),
			Attrs: map[string]string{"gen_ai.usage.input_tokens": "800", "gen_ai.usage.output_tokens": "30"}},
		{Service: "chatguard-worker", Name: "chat sim-primary", TraceID: "a", SpanID: "5", Parent: "3", Start: at(21), End: at(249),
			Attrs: map[string]string{"gen_ai.usage.input_tokens": "800", "gen_ai.usage.output_tokens": "30"}},
		{Service: "chatguard-worker", Name: "chat sim-primary", TraceID: "a", SpanID: "6", Parent: "4", Start: at(301), End: at(699),
			Attrs: map[string]string{"gen_ai.usage.input_tokens": "900", "gen_ai.usage.output_tokens": "120"}},
		{Service: "chatguard-consumer", Name: "lake write", TraceID: "a", SpanID: "7", Parent: "gone", Start: at(900), End: at(950)},
		// Another review's lake write that links this one.
		{Service: "chatguard-consumer", Name: "lake write", TraceID: "b", SpanID: "10", Parent: "8", Start: at(960), End: at(990), LinkedTraces: []string{"a"}},
		// Another review with fewer model attempts.
		{Service: "chatguard-worker", Name: "job", TraceID: "b", SpanID: "8", Start: at(0), End: at(100)},
		{Service: "chatguard-worker", Name: "chat sim-primary", TraceID: "b", SpanID: "9", Parent: "8", Start: at(1), End: at(99)},
	}
	got := OneReview(append(spans[7:8:8], spans...))
	require.Len(t, got, 9, "the trace with two model attempts, and the span linking it (given twice)")
	got = OneReview(spans)
	require.Equal(t, "a", TraceOf(got))
	var b strings.Builder
	PrintTrace(&b, got)
	require.Equal(t, `  review publish  [batch] 5ms
    job  [worker] 790ms
      stage triage  [worker] 230ms  tokens 800 in / 30 out
        chat sim-primary  [worker] 228ms  tokens 800 in / 30 out
      stage judge  [worker] 400ms  tokens 900 in / 120 out
        chat sim-primary  [worker] 398ms  tokens 900 in / 120 out
  lake write  [consumer] 50ms
  lake write  [consumer] 30ms  (links this trace)
`, b.String())
	require.Nil(t, OneReview(spans[:1]), "no job, no trace")
}
