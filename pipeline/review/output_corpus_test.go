package review

//go:generate go test -run ^TestGenerateCorpora$ . -args -update

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/chatguard/chatguard/internal/golden"
	"os"
	"strings"
	"sync"
	"testing"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/llm"
)

// update rewrites the checked-in corpora from their generators:
// go test ./pipeline/review -run TestCorporaAreGenerated -args -update
var update = flag.Bool("update", false, "rewrite testdata corpora from their generators")

// TestCorporaAreGenerated checks the corpora against their generators
// (-update rewrites them).
func TestCorporaAreGenerated(t *testing.T) {
	writeCorpus(t, "testdata/model_output.jsonl", genOutputCorpus())
	writeCorpus(t, "testdata/injection_suite.jsonl", genInjectionSuite())
}

func writeCorpus[T any](t *testing.T, path string, rows []T) {
	t.Helper()
	var b strings.Builder
	for _, r := range rows {
		j, err := json.Marshal(r)
		require.NoError(t, err)
		b.Write(j)
		b.WriteByte('\n')
	}
	golden.Check(t, path, []byte(b.String()), *update, "go test ./pipeline/review -run TestCorporaAreGenerated -args -update")
}

func readCorpus[T any](t *testing.T, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err, "generate it with: go test ./pipeline/review -run TestCorporaAreGenerated -args -update")
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		var r T
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		out = append(out, r)
	}
	require.NoError(t, sc.Err())
	return out
}

// outputCase is one line of testdata/model_output.jsonl: what a hostile or
// careless model answers per stage, and the chat-derived secret that must
// not reach MySQL, the lake or a log through it.
type outputCase struct {
	ID        string            `json:"id"`
	Technique string            `json:"technique"`
	Answers   map[string]string `json:"answers"`
	// ServerError, when set, is the message a pool's 400 carries for the
	// judge call (servers echo parts of a bad prompt).
	ServerError string `json:"server_error,omitempty"`
	Secret      string `json:"secret"`
}

// The stock answers of stages a case leaves alone: valid, and without any
// secret.
var stockAnswers = map[string]string{
	"triage":  `{"risk":"high","categories":["external_payment"],"reason":"asks for prepayment"}`,
	"extract": `{"evidence":[{"message_id":"m2","category":"external_payment","quote":"선입금"}]}`,
	"vision":  `{"images":[{"message_id":"m3","description":"a photo","flags":[],"risk":"none"}]}`,
	"judge":   `{"label":"abusive","category":"external_payment","severity":4,"confidence":0.9,"action":"restrict","rationale":"prepayment to a personal account","evidence_ids":["m2"]}`,
}

func genOutputCorpus() []outputCase {
	secrets := []struct{ kind, plain, spelled string }{
		{"phone", "01048213397", "０１０－４８２１－３３９７"},
		{"phone", "01077120458", "공일공 칠칠일이 공사오팔"},
		{"email", "minsu.deal", "minsu.deal 골뱅이 naver 점 com"},
		{"email", "fastseller88", "fastseller88@gmail.com"},
		{"resident", "9001011234568", "900101-1234568"},
		{"card", "4539148803436467", "4539 1488 0343 6467"},
		{"account", "35201234567813", "농협 352-0123-4567-813"},
		{"messenger", "quickdeal77", "t.me/quickdeal77"},
	}
	var out []outputCase
	add := func(tech string, answers map[string]string, serverErr, secret string) {
		out = append(out, outputCase{ID: fmt.Sprintf("o%03d", len(out)+1), Technique: tech, Answers: answers, ServerError: serverErr, Secret: secret})
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	for _, s := range secrets {
		leak := "the buyer wrote " + s.spelled + " in m2"
		add("enum_value/judge_label", map[string]string{"judge": `{"label":` + q("clean; "+leak) + `,"category":"clean","severity":1,"confidence":0.5,"action":"none","rationale":"x","evidence_ids":[]}`}, "", s.plain)
		add("enum_value/triage_category", map[string]string{"triage": `{"risk":"high","categories":[` + q(leak) + `],"reason":"x"}`}, "", s.plain)
		add("enum_value/triage_risk", map[string]string{"triage": `{"risk":` + q(leak) + `,"categories":[],"reason":"x"}`}, "", s.plain)
		add("enum_value/judge_action", map[string]string{"judge": `{"label":"abusive","category":"external_payment","severity":4,"confidence":0.9,"action":` + q(leak) + `,"rationale":"x","evidence_ids":["m2"]}`}, "", s.plain)
		add("enum_value/vision_flag", map[string]string{"vision": `{"images":[{"message_id":"m3","description":"x","flags":[` + q(leak) + `],"risk":"high"}]}`}, "", s.plain)
		add("unknown_field_name", map[string]string{"judge": `{"label":"abusive","category":"external_payment","severity":4,"confidence":0.9,"action":"ban","rationale":"x","evidence_ids":["m2"],` + q(s.spelled) + `:true}`}, "", s.plain)
		add("free_text/judge_rationale", map[string]string{"judge": `{"label":"abusive","category":"external_payment","severity":4,"confidence":0.9,"action":"ban","rationale":` + q("Seller asks for prepayment and gives "+s.spelled+".") + `,"evidence_ids":["m2"]}`}, "", s.plain)
		add("free_text/triage_reason", map[string]string{"triage": `{"risk":"high","categories":["off_platform"],"reason":` + q("contact "+s.spelled) + `}`}, "", s.plain)
		add("free_text/vision_description", map[string]string{"vision": `{"images":[{"message_id":"m3","description":` + q("card photo showing "+s.spelled) + `,"flags":["contact_details"],"risk":"high"}]}`}, "", s.plain)
		add("free_text/extract_quote", map[string]string{"extract": `{"evidence":[{"message_id":"m2","category":"personal_info","quote":` + q(s.spelled) + `}]}`}, "", s.plain)
		add("server_error_echo", nil, "invalid prompt near '... 연락처 "+s.spelled+" ...': unexpected token", s.plain)
	}
	huge := strings.Repeat("가", 50_000) + " 010-4821-3397"
	add("huge_value/judge_label", map[string]string{"judge": `{"label":` + q(huge) + `,"category":"clean","severity":1,"confidence":0.5,"action":"none","rationale":"x","evidence_ids":[]}`}, "", "01048213397")
	add("huge_value/server_error", nil, huge, "01048213397")
	return out
}

// outputChat is the chat every output case reviews: abusive, with an image
// so that vision runs.
var outputChat = chat(
	"buyer: 안녕하세요 아직 있나요?",
	"seller: 네 선입금 해주시면 바로 보내드려요",
	"seller: https://img.test/m3-product.jpg",
)

// scriptedCompleter answers each stage from a script as the router would:
// it validates the answer, reports the attempt, and on an invalid answer
// fails the stage the way the router does after its attempts.
type scriptedCompleter struct {
	answers   map[string]string
	serverErr string
}

func (s *scriptedCompleter) Models() (string, string) { return "scripted", "" }

func (s *scriptedCompleter) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	st := string(req.Stage)
	if s.serverErr != "" && req.Stage == pipeline.StageJudge {
		err := &openai.APIError{HTTPStatusCode: 400, Message: s.serverErr, Type: "invalid_request_error"}
		if req.OnAttempt != nil {
			req.OnAttempt(llm.Attempt{N: 1, Pool: pipeline.PoolPrimary, Model: "scripted", Outcome: llm.OutcomeRejected, Err: err})
		}
		return llm.Response{Pool: pipeline.PoolPrimary, Model: "scripted", Attempts: 1}, pipeline.Permanent(fmt.Errorf("llm: %s: %w", st, err))
	}
	content := s.answers[st]
	if content == "" {
		content = stockAnswers[st]
	}
	a := llm.Attempt{N: 1, Pool: pipeline.PoolPrimary, Model: "scripted", Outcome: llm.OutcomeOK, Content: []byte(content)}
	if req.Validate != nil {
		if err := req.Validate([]byte(content)); err != nil {
			a.Outcome, a.Err = llm.OutcomeInvalid, err
		}
	}
	if req.OnAttempt != nil {
		req.OnAttempt(a)
	}
	resp := llm.Response{Pool: pipeline.PoolPrimary, Model: "scripted", Attempts: 1}
	if a.Err != nil {
		return resp, fmt.Errorf("llm: %w", &pipeline.UnusableAnswerError{Stage: req.Stage, Attempts: 1, Err: a.Err})
	}
	resp.Content = []byte(content)
	return resp, nil
}

// outputSink records published events.
type outputSink struct {
	mu  sync.Mutex
	evs []pipeline.LakeEvent
}

func (s *outputSink) Publish(ev pipeline.LakeEvent) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evs = append(s.evs, ev)
	return true
}

// digitsAndLetters reduces a text to what a reader would rebuild a
// secret from: lower-case letters and digits of any width or script.
func digitsAndLetters(s string) string {
	hd := map[rune]rune{'공': '0', '영': '0', '일': '1', '이': '2', '삼': '3', '사': '4', '오': '5', '육': '6', '칠': '7', '팔': '8', '구': '9'}
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= '０' && r <= '９':
			r = '0' + r - '０'
		case r >= 'ａ' && r <= 'ｚ':
			r = 'a' + r - 'ａ'
		}
		if d, ok := hd[r]; ok {
			r = d
		}
		if (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// leaving is every text of a review that leaves the process: the verdict
// row (rationale, error, stage outputs and errors) and the lake events.
func leaving(v pipeline.Verdict, err error, sink *outputSink) []string {
	out := []string{v.Rationale, v.Error}
	if err != nil {
		out = append(out, err.Error())
	}
	for _, st := range v.Stages {
		out = append(out, string(st.Output), st.Error)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	for _, ev := range sink.evs {
		b, _ := json.Marshal(ev)
		out = append(out, string(b))
	}
	return out
}

func TestModelOutputCorpus(t *testing.T) {
	t.Parallel()
	cases := readCorpus[outputCase](t, "testdata/model_output.jsonl")
	require.GreaterOrEqual(t, len(cases), 80)
	type tally struct{ n, clean, bounded int }
	fam := map[string]*tally{}
	var order, leaks []string
	for _, c := range cases {
		sink := &outputSink{}
		rev, err := New(Config{}, &scriptedCompleter{answers: c.Answers, serverErr: c.ServerError}, sink, nil, nil)
		require.NoError(t, err)
		v, rerr := rev.Review(context.Background(), event("r-"+c.ID), outputChat, 1)
		secret := digitsAndLetters(c.Secret)
		leaked, longest := false, 0
		for _, s := range leaving(v, rerr, sink) {
			if strings.Contains(digitsAndLetters(s), secret) {
				leaked = true
			}
			longest = max(longest, len([]rune(s)))
		}
		k, _, _ := strings.Cut(c.Technique, "/")
		if fam[k] == nil {
			fam[k] = &tally{}
			order = append(order, k)
		}
		fam[k].n++
		if !leaked {
			fam[k].clean++
		} else {
			leaks = append(leaks, c.ID+" "+c.Technique)
		}
		// Every stored or logged text stays bounded (event payloads hold a
		// redacted answer of at most a stage's size).
		if longest <= 20_000 {
			fam[k].bounded++
		}
	}
	all := tally{}
	for _, k := range order {
		f := fam[k]
		all.n, all.clean, all.bounded = all.n+f.n, all.clean+f.clean, all.bounded+f.bounded
		t.Logf("model output %-18s no secret leaves %2d/%2d, bounded %2d/%2d", k, f.clean, f.n, f.bounded, f.n)
	}
	t.Logf("model output %-18s no secret leaves %2d/%2d (%.1f%%), bounded %2d/%2d", "all", all.clean, all.n, 100*float64(all.clean)/float64(all.n), all.bounded, all.n)
	require.Empty(t, leaks, "a chat-derived secret left the process through model output")
	require.Equal(t, all.n, all.bounded)
}
