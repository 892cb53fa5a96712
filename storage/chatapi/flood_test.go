package chatapi

//go:generate go test -run ^TestGenerateFloodCorpus$ . -args -update

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/chatguard/chatguard/internal/golden"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatprep"
)

var update = flag.Bool("update", false, "rewrite testdata corpora from their generators")

// floodCase is one line of testdata/flood.jsonl: how a flooded room's
// history is built. The bodies are megabytes, so the corpus keeps the
// recipe and floodBody expands it, deterministically, as a stream.
type floodCase struct {
	ID        string `json:"id"`
	Technique string `json:"technique"`
	// Messages flood messages of TextBytes each, of kind Kind.
	Messages  int    `json:"messages"`
	TextBytes int    `json:"text_bytes"`
	Kind      string `json:"kind"`
	// Giant, when positive, is the size of one more message, the oldest.
	Giant int `json:"giant,omitempty"`
	// Pad, when positive, is the size of an unknown field before messages.
	Pad     int      `json:"pad,omitempty"`
	Needles []needle `json:"needles"`
}

// needle is a message with a rule signal placed in the flood.
type needle struct {
	// At is "oldest", "middle", "newest" or "giant_end" (the end of the
	// giant message's text).
	At   string `json:"at"`
	Text string `json:"text"`
	Kind string `json:"kind"`
}

func genFloodCorpus() []floodCase {
	r := rand.New(rand.NewPCG(13, 5))
	phone := func() string { return fmt.Sprintf("010-%04d-%04d", r.IntN(10000), r.IntN(10000)) }
	ns := func(at ...string) []needle {
		var out []needle
		for i, a := range at {
			switch i % 3 {
			case 0:
				out = append(out, needle{At: a, Text: "급하면 " + phone() + " 로 문자주세요", Kind: "phone"})
			case 1:
				out = append(out, needle{At: a, Text: "결제는 여기서 https://bunjang-pay.safe24.xyz/pay", Kind: "url"})
			default:
				out = append(out, needle{At: a, Text: "국민은행 " + fmt.Sprintf("%06d-%02d-%06d", r.IntN(1e6), r.IntN(100), r.IntN(1e6)) + " 선입금", Kind: "bank_account"})
			}
		}
		return out
	}
	var out []floodCase
	add := func(c floodCase) {
		c.ID = fmt.Sprintf("f%02d", len(out)+1)
		out = append(out, c)
	}
	// The client under test keeps floodKeep bytes and reads floodRead
	// (production defaults are 32x larger); the floods are sized to them.
	add(floodCase{Technique: "many_small", Messages: 5_000, TextBytes: 60, Kind: "text", Needles: ns("oldest", "middle", "newest")})
	add(floodCase{Technique: "many_small_spam", Messages: 10_000, TextBytes: 30, Kind: "text", Needles: ns("oldest", "newest")})
	add(floodCase{Technique: "few_huge", Messages: 4, TextBytes: 100 << 10, Kind: "text", Needles: ns("oldest", "newest")})
	add(floodCase{Technique: "single_giant", Giant: 384 << 10, Needles: ns("giant_end", "newest")})
	add(floodCase{Technique: "image_flood", Messages: 4_000, TextBytes: 80, Kind: "image", Needles: ns("oldest", "newest")})
	add(floodCase{Technique: "system_flood", Messages: 5_000, TextBytes: 60, Kind: "system", Needles: ns("oldest", "middle", "newest")})
	add(floodCase{Technique: "padded_unknown_field", Pad: 384 << 10, Messages: 20, TextBytes: 100, Kind: "text", Needles: ns("oldest", "newest")})
	add(floodCase{Technique: "beyond_read_bound", Messages: 20_000, TextBytes: 80, Kind: "text", Needles: ns("oldest")})
	add(floodCase{Technique: "just_over_bound", Messages: 1_300, TextBytes: 200, Kind: "text", Needles: ns("oldest", "middle", "newest")})
	return out
}

// TestGenerateFloodCorpus checks the corpus against its generator
// (-update rewrites it).
func TestGenerateFloodCorpus(t *testing.T) {
	var b strings.Builder
	for _, c := range genFloodCorpus() {
		j, _ := json.Marshal(c)
		b.Write(j)
		b.WriteByte('\n')
	}
	golden.Check(t, "testdata/flood.jsonl", []byte(b.String()), *update, "go test ./storage/chatapi -run TestGenerateFloodCorpus -args -update")
}

func loadFloodCorpus(t testing.TB) []floodCase {
	t.Helper()
	f, err := os.Open("testdata/flood.jsonl")
	if err != nil {
		t.Fatalf("generate it with: go test ./storage/chatapi -run TestGenerateFloodCorpus -args -update: %v", err)
	}
	defer f.Close()
	var out []floodCase
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c floodCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// The bounds of the client under test.
const (
	floodKeep = 256 << 10
	floodRead = 2 << 20
)

var floodT0 = time.Date(2026, 11, 2, 19, 0, 0, 0, time.UTC)

// writeFloodBody streams the history of c to w.
func writeFloodBody(w io.Writer, c floodCase) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	fmt.Fprintf(bw, `{"room_id":"flood","from":%q,"to":%q,`, floodT0.Format(time.RFC3339), floodT0.Add(time.Hour).Format(time.RFC3339))
	if c.Pad > 0 {
		bw.WriteString(`"debug_dump":"`)
		bw.WriteString(strings.Repeat("x", c.Pad))
		bw.WriteString(`",`)
	}
	bw.WriteString(`"messages":[`)
	n := 0
	at := func(i int) time.Time { return floodT0.Add(time.Duration(i) * time.Millisecond) }
	write := func(m pipeline.ChatMessage) error {
		if n > 0 {
			bw.WriteByte(',')
		}
		n++
		b, _ := json.Marshal(m)
		_, err := bw.Write(b)
		return err
	}
	needleAt := map[string]string{}
	for _, nd := range c.Needles {
		needleAt[nd.At] = nd.Text
	}
	idx := 0
	if c.Giant > 0 {
		text := strings.Repeat("아무 말이나 길게 씁니다 ", c.Giant/34) + " " + needleAt["giant_end"]
		if err := write(pipeline.ChatMessage{MessageID: "giant", SenderID: "s", SenderRole: pipeline.RoleSeller, SentAt: at(idx), Kind: pipeline.KindText, Text: text}); err != nil {
			return err
		}
		idx++
	}
	if t, ok := needleAt["oldest"]; ok {
		if err := write(pipeline.ChatMessage{MessageID: "needle-oldest", SenderID: "s", SenderRole: pipeline.RoleSeller, SentAt: at(idx), Kind: pipeline.KindText, Text: t}); err != nil {
			return err
		}
		idx++
	}
	filler := strings.Repeat("ㅋ", max(c.TextBytes/3, 1))
	for i := range c.Messages {
		if i == c.Messages/2 {
			if t, ok := needleAt["middle"]; ok {
				if err := write(pipeline.ChatMessage{MessageID: "needle-middle", SenderID: "s", SenderRole: pipeline.RoleSeller, SentAt: at(idx), Kind: pipeline.KindText, Text: t}); err != nil {
					return err
				}
				idx++
			}
		}
		m := pipeline.ChatMessage{MessageID: fmt.Sprintf("f%07d", i), SenderID: "b", SenderRole: pipeline.RoleBuyer, SentAt: at(idx), Kind: pipeline.KindText, Text: filler}
		switch c.Kind {
		case "image":
			m.Kind, m.Text, m.ImageURL = pipeline.KindImage, "", "https://img.test/"+strings.Repeat("p", max(c.TextBytes-20, 1))+".jpg"
		case "system":
			m.Kind, m.SenderRole, m.Text = pipeline.KindSystem, pipeline.RoleSystem, "구매자가 채팅방에 들어왔습니다"
		}
		if err := write(m); err != nil {
			return err
		}
		idx++
	}
	if t, ok := needleAt["newest"]; ok {
		if err := write(pipeline.ChatMessage{MessageID: "needle-newest", SenderID: "s", SenderRole: pipeline.RoleSeller, SentAt: at(idx), Kind: pipeline.KindText, Text: t}); err != nil {
			return err
		}
	}
	bw.WriteString(`]}`)
	return bw.Flush()
}

func floodServer(t testing.TB, c floodCase) *Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = writeFloodBody(w, c) // the client may hang up at its read bound
	}))
	t.Cleanup(srv.Close)
	cfg := DefaultConfig()
	cfg.BaseURL = srv.URL
	cfg.Timeout = 60 * time.Second
	cfg.MaxBodyBytes, cfg.MaxReadBytes = floodKeep, floodRead
	cl, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// TestFloodRates prints, per flooded room, whether it was reviewed at all
// and whether the needles' signals survived, the figures of
// docs/performance.md's table. It uses only History and Prepare, so the same file measures the
// code before and after the flood defences:
//
//	go test ./storage/chatapi -run TestFloodRates -v
func TestFloodRates(t *testing.T) {
	cases := loadFloodCorpus(t)
	reviewed, needles, found := 0, 0, 0
	for _, c := range cases {
		cl := floodServer(t, c)
		msgs, err := cl.History(context.Background(), "flood", floodT0, floodT0.Add(time.Hour))
		needles += len(c.Needles)
		if err != nil {
			t.Logf("flood %-22s not reviewed: %v", c.Technique, err)
			continue
		}
		reviewed++
		w := chatprep.Prepare(msgs, chatprep.Config{})
		kinds := map[string]int{}
		for _, s := range w.Signals {
			kinds[string(s.Kind)]++
		}
		got := 0
		for _, nd := range c.Needles {
			if kinds[nd.Kind] > 0 {
				kinds[nd.Kind]--
				got++
			}
		}
		found += got
		t.Logf("flood %-22s reviewed with %d messages kept; needles found %d/%d", c.Technique, len(msgs), got, len(c.Needles))
	}
	t.Logf("flood all: reviewed %d/%d rooms, needle signals found %d/%d", reviewed, len(cases), found, needles)
	if reviewed != len(cases) || found != needles {
		t.Errorf("a flooded room avoided review or lost a needle")
	}
}
