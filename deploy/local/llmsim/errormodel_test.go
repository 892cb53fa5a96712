package llmsim

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

func judged(t *testing.T, e ErrorModel, block string) (pipeline.Label, pipeline.Category) {
	t.Helper()
	out := judgeAnswer(e.apply(analyzePrompt(block, nil), block))
	return out.Label, out.Category
}

func TestErrorModelMissesFalseAlarmsAndHardNegatives(t *testing.T) {
	t.Parallel()
	phishing := transcriptBlock(transcript(line{"s", "안전결제 링크입니다 https://bunjang-pay.safe24.xyz/pay?order=123456 30분 안에 결제하셔야 해요", ""}))
	clean := transcriptBlock(transcript(line{"b", "안녕하세요 아이폰 아직 판매중인가요?", ""}, line{"s", "네 판매중이에요", ""}))
	// A phone number given without a meetup: a weak signal, clean by the
	// rules.
	hard := transcriptBlock(transcript(line{"b", "제 번호 010-1234-5678 입니다", ""}))

	l, c := judged(t, ErrorModel{}, phishing)
	require.Equal(t, pipeline.CategoryPhishingLink, c, "no error model: the rules' answer")
	require.Equal(t, pipeline.LabelAbusive, l)
	l, _ = judged(t, ErrorModel{Miss: map[pipeline.Category]float64{pipeline.CategoryPhishingLink: 1}}, phishing)
	require.Equal(t, pipeline.LabelClean, l, "a certain miss")
	l, _ = judged(t, ErrorModel{Miss: map[pipeline.Category]float64{"*": 1, pipeline.CategoryPhishingLink: 0}}, phishing)
	require.NotEqual(t, pipeline.LabelClean, l, "a named category overrides *")

	l, c = judged(t, ErrorModel{FalseAlarm: map[pipeline.Category]float64{pipeline.CategorySpam: 1}}, clean)
	require.NotEqual(t, pipeline.LabelClean, l, "a certain false alarm")
	require.Equal(t, pipeline.CategorySpam, c)

	l, _ = judged(t, ErrorModel{}, hard)
	require.Equal(t, pipeline.LabelClean, l)
	require.NotEmpty(t, analyzePrompt(hard, nil).Signals, "a hard negative: weak signals only")
	l, _ = judged(t, ErrorModel{HardNegative: 1}, hard)
	require.NotEqual(t, pipeline.LabelClean, l, "a hard negative judged wrong")
	l, _ = judged(t, ErrorModel{HardNegative: 1}, clean)
	require.Equal(t, pipeline.LabelClean, l, "a chat without signals is not a hard negative")
}

func TestErrorModelIsSeededAndNoisyOnlyWhereAsked(t *testing.T) {
	t.Parallel()
	// 200 different phishing chats at a miss rate of 0.3: the same seed
	// misses the same ones; about 30 % are missed.
	var blocks []string
	for i := range 200 {
		blocks = append(blocks, transcriptBlock(transcript(line{"s", "안전결제 링크입니다 https://bunjang-pay.safe24.xyz/pay?order=" + string(rune('a'+i%26)) + string(rune('a'+i/26)) + " 30분 안에 결제하셔야 해요", ""})))
	}
	e := ErrorModel{Seed: 3, Miss: map[pipeline.Category]float64{"*": 0.3}}
	missed := func(e ErrorModel) []bool {
		out := make([]bool, len(blocks))
		for i, b := range blocks {
			l, _ := judged(t, e, b)
			out[i] = l == pipeline.LabelClean
		}
		return out
	}
	first := missed(e)
	require.Equal(t, first, missed(e), "seeded: the same chats are missed again")
	n := 0
	for _, m := range first {
		if m {
			n++
		}
	}
	require.InDelta(t, 60, n, 25)
	e2 := e
	e2.Seed = 4
	require.NotEqual(t, first, missed(e2), "another seed, other chats")
	// With every chat nondeterministic, two passes disagree somewhere.
	e.Nondeterminism = 1
	require.NotEqual(t, missed(e), missed(e))
	require.Error(t, Config{Errors: ErrorModel{HardNegative: 2}}.Errors.validate())
}

func TestImageURLsPayTheFetchAndDataURLsDoNot(t *testing.T) {
	t.Parallel()
	cfg := Config{ImageTTFT: 100 * time.Millisecond, ImageURLFetch: 600 * time.Millisecond}
	require.Equal(t, 700*time.Millisecond, imageTTFT(&cfg, []string{"https://img.example-market.test/a.jpg"}))
	require.Equal(t, 100*time.Millisecond, imageTTFT(&cfg, []string{"data:image/jpeg;base64,AAAA"}))
	require.Zero(t, imageTTFT(&cfg, nil))
}

func TestVersionAndMaxModelLenAnswerAsVLLMDoes(t *testing.T) {
	t.Parallel()
	cfg := fastConfig()
	cfg.Version, cfg.MaxModelLen = "0.0-sim", 4096
	f := setup(t, cfg, nil)
	get := func(path string) (int, string) {
		resp, err := http.Get(strings.TrimSuffix(f.run.URL, "/v1") + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	code, body := get("/version")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"version":"0.0-sim"}`, body)
	_, body = get("/v1/models")
	require.Contains(t, body, `"max_model_len":4096`)
	require.NoError(t, f.sim.UpdateConfig(func(c *Config) { c.Version = "" }))
	code, _ = get("/version")
	require.Equal(t, http.StatusNotFound, code, "no version: answered as a managed API, 404")
}
