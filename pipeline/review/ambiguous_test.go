package review

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/llm"
)

// scriptedPool is an OpenAI-compatible server that streams, per stage, the
// next of its scripted answers (the last one repeats), and records the
// prompts it was sent. As a model would, it copies placeholders from the
// transcript it was sent: "{PHONE}" in an answer becomes the first <PHONE_n>
// of the transcript block, "{MESSENGER_ID}" the first <MESSENGER_ID_n>.
type scriptedPool struct {
	mu      sync.Mutex
	answers map[pipeline.StageName][]string
	calls   map[pipeline.StageName]int
	prompts []string
}

func (p *scriptedPool) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
		ResponseFormat struct {
			JSONSchema struct {
				Name string `json:"name"`
			} `json:"json_schema"`
		} `json:"response_format"`
	}
	b, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	st := pipeline.StageName(req.ResponseFormat.JSONSchema.Name)
	p.mu.Lock()
	script := p.answers[st]
	n := p.calls[st]
	p.calls[st]++
	for _, m := range req.Messages {
		p.prompts = append(p.prompts, m.Content)
	}
	p.mu.Unlock()
	if len(script) == 0 {
		http.Error(w, "no script for "+string(st), http.StatusInternalServerError)
		return
	}
	answer := script[min(n, len(script)-1)]
	transcript := ""
	for _, m := range req.Messages {
		if _, after, ok := strings.Cut(m.Content, "<chat_transcript>"); ok {
			transcript = after
		}
	}
	for _, kind := range []string{"PHONE", "MESSENGER_ID"} {
		if ph := regexp.MustCompile(`<` + kind + `_\d+>`).FindString(transcript); ph != "" {
			answer = strings.ReplaceAll(answer, "{"+kind+"}", ph)
		}
	}
	content, _ := json.Marshal(answer)
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%s},\"finish_reason\":null}]}\n\n", content)
	fmt.Fprint(w, "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// TestAmbiguousAnswersNeverStoreUnmasked reviews a chat with contact
// details through the real router and a pool that pseudonymizes (as the
// third-party fallback does), whose model answers one stage first with an
// answer that encoding/json and a key-by-key redactor would read
// differently: a repeated key, a case-variant key, a restored placeholder
// in a repeated id. The answer is invalid (the stage asks again and takes
// the repaired answer), and no contact detail or chat text reaches the
// verdict row, its stage outputs or the inference-log events.
func TestAmbiguousAnswersNeverStoreUnmasked(t *testing.T) {
	t.Parallel()
	const (
		triageOK  = `{"risk":"high","categories":["off_platform"],"reason":"asks to move off the platform"}`
		extractOK = `{"evidence":[{"message_id":"m2","category":"off_platform","quote":"{PHONE}"}]}`
		judgeOK   = `{"label":"abusive","category":"off_platform","severity":4,"confidence":0.9,"action":"restrict","rationale":"asks to move off the platform","evidence_ids":["m2"]}`
	)
	tests := []struct {
		name    string
		stage   pipeline.StageName
		hostile string
		// triage, when set, replaces the triage answer.
		triage string
		// valid: the answer is unambiguous and accepted at once.
		valid bool
	}{
		{name: "duplicate keys", stage: pipeline.StageExtract,
			hostile: `{"evidence":[{"message_id":"call 010-1234-5678","message_id":"m2","category":"off_platform","quote":"x"}]}`},
		{name: "case-variant keys", stage: pipeline.StageExtract,
			hostile: `{"evidence":[{"message_id":"m2","category":"external_payment","QUOTE":"선입금 해주시면 바로 보내드려요"}]}`},
		{name: "case-variant id beside the id", stage: pipeline.StageExtract,
			hostile: `{"evidence":[{"Message_id":"call 010-1234-5678","message_id":"m2","category":"off_platform","quote":"x"}]}`},
		{name: "restored placeholder in a repeated id", stage: pipeline.StageExtract,
			hostile: `{"evidence":[{"message_id":"{PHONE}","message_id":"m2","category":"off_platform","quote":"x"}]}`},
		{name: "restored placeholder in a repeated judge id", stage: pipeline.StageJudge,
			hostile: `{"label":"abusive","category":"off_platform","severity":4,"confidence":0.9,"action":"restrict","rationale":"x","evidence_ids":["{PHONE}"],"evidence_ids":["m2"]}`},
		{name: "restored placeholders in free text", stage: pipeline.StageJudge,
			hostile: `{"label":"abusive","category":"off_platform","severity":4,"confidence":0.9,"action":"restrict","rationale":"moves the chat to {MESSENGER_ID}, phone {PHONE}","evidence_ids":["m2"]}`,
			triage:  `{"risk":"high","categories":["off_platform"],"reason":"contact {MESSENGER_ID}"}`, valid: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			answers := map[pipeline.StageName][]string{
				pipeline.StageTriage:  {triageOK},
				pipeline.StageExtract: {extractOK},
				pipeline.StageJudge:   {judgeOK},
			}
			answers[tc.stage] = []string{tc.hostile, answers[tc.stage][0]}
			if tc.triage != "" {
				answers[pipeline.StageTriage] = []string{tc.triage}
			}
			pool := &scriptedPool{answers: answers, calls: map[pipeline.StageName]int{}}
			srv := httptest.NewServer(pool)
			t.Cleanup(srv.Close)
			router, err := llm.New(llm.Config{
				Primary:     llm.PoolConfig{BaseURL: srv.URL + "/v1", Model: "scripted", MaxConcurrency: 4, AttemptTimeout: 10 * time.Second, Pseudonymize: true},
				MaxAttempts: 3, BaseBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
			}, prometheus.NewRegistry())
			require.NoError(t, err)
			sink := &outputSink{}
			rev, err := New(Config{}, completerOnly{router}, sink, nil, nil)
			require.NoError(t, err)

			msgs := chat("buyer: 안녕하세요 아직 있나요?", "seller: 카톡 아이디: dealking99 아니면 010-1234-5678 로 연락주세요. 선입금 해주시면 바로 보내드려요")
			v, err := rev.Review(t.Context(), event("ambiguous"), msgs, 1)
			require.NoError(t, err)
			require.Equal(t, pipeline.StatusDone, v.Status)

			for _, s := range leaving(v, err, sink) {
				d := digitsAndLetters(s)
				require.NotContains(t, d, "01012345678", "a phone number left unmasked in %q", s)
				require.NotContains(t, d, "12345678", "a phone number left unmasked in %q", s)
				require.NotContains(t, d, "dealking99", "a messenger id left unmasked in %q", s)
				require.NotContains(t, s, "선입금 해주시면", "chat text left in clear in %q", s)
			}

			pool.mu.Lock()
			calls, prompts := pool.calls[tc.stage], strings.Join(pool.prompts, "\n")
			pool.mu.Unlock()
			wantOutcomes := []string{"invalid", "ok"}
			if tc.valid {
				wantOutcomes = []string{"ok"}
			}
			require.Equal(t, len(wantOutcomes), calls, "an ambiguous answer is invalid and the stage asks again")
			require.NotContains(t, prompts, "010-1234-5678", "the pool pseudonymizes")
			require.Regexp(t, `<PHONE_\d+>`, prompts)
			var outcomes []string
			sink.mu.Lock()
			evs := sink.evs
			sink.mu.Unlock()
			for _, ev := range evs {
				if l := ev.Payload.(pipeline.InferenceLog); l.Stage == tc.stage {
					outcomes = append(outcomes, l.Outcome)
					if l.Outcome != "ok" {
						require.Empty(t, l.Output, "an invalid answer is not logged")
					}
				}
			}
			require.Equal(t, wantOutcomes, outcomes)
		})
	}
}

// TestRestoredValueNeverLeavesInProblemsOrRepairs: a pseudonymizing pool
// answers an enum with a placeholder; restored, it is the chat's messenger
// id, which the validation problem quotes (it looks like an enum value).
// Neither the repair requests sent back to the pool nor the stored stage
// error nor the review's error carries the id.
func TestRestoredValueNeverLeavesInProblemsOrRepairs(t *testing.T) {
	t.Parallel()
	pool := &scriptedPool{answers: map[pipeline.StageName][]string{
		pipeline.StageTriage: {`{"risk":"{MESSENGER_ID}","categories":[],"reason":"x"}`},
	}, calls: map[pipeline.StageName]int{}}
	srv := httptest.NewServer(pool)
	t.Cleanup(srv.Close)
	router, err := llm.New(llm.Config{
		Primary:     llm.PoolConfig{BaseURL: srv.URL + "/v1", Model: "scripted", MaxConcurrency: 4, AttemptTimeout: 10 * time.Second, Pseudonymize: true},
		MaxAttempts: 3, BaseBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
	}, prometheus.NewRegistry())
	require.NoError(t, err)
	sink := &outputSink{}
	rev, err := New(Config{}, completerOnly{router}, sink, nil, nil)
	require.NoError(t, err)
	msgs := chat("buyer: 안녕하세요", "seller: 카톡 아이디: dealking 으로 연락주세요")
	v, err := rev.Review(t.Context(), event("restored-problem"), msgs, 1)
	require.Error(t, err, "every answer is invalid")

	pool.mu.Lock()
	calls, prompts := pool.calls[pipeline.StageTriage], strings.Join(pool.prompts, "\n")
	pool.mu.Unlock()
	require.Equal(t, 3, calls)
	require.Contains(t, prompts, "is not none, low or high", "the problem was sent back for repair")
	require.NotContains(t, prompts, "dealking", "the pool sees the placeholder only, repairs included")
	for _, s := range leaving(v, err, sink) {
		require.NotContains(t, s, "dealking", "the messenger id left in %q", s)
	}
}
