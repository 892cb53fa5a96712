// Package evalsample makes the checked-in sample report of `worker eval`
// (docs/eval/sample): it turns the sample lake's truth set into eval cases
// and starts three llmsim endpoints shaped like the design notes' setups.
// They are SIMULATORS: the report measures the mechanics (prompts, caching,
// queueing, goodput arithmetic), not a model.
package evalsample

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/chatguard/chatguard/deploy/local/llmsim"
	"github.com/chatguard/chatguard/deploy/local/sampledata"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/eval"
)

// SampleCases generates the sample lake (seed, rooms) in a temporary
// folder and returns its labelled rooms as eval cases, the first n by room
// id (all when n is 0).
func SampleCases(ctx context.Context, seed int64, rooms, n int) ([]eval.Case, error) {
	dir, err := os.MkdirTemp("", "evalsample-")
	if err != nil {
		return nil, fmt.Errorf("evalsample: %w", err)
	}
	defer os.RemoveAll(dir)
	lake, truthDir := filepath.Join(dir, "lake"), filepath.Join(dir, "truth")
	if _, err := sampledata.Generate(ctx, sampledata.Options{LakeDir: lake, TruthDir: truthDir, Seed: seed, Rooms: rooms}); err != nil {
		return nil, fmt.Errorf("evalsample: generate: %w", err)
	}
	msgs, err := sampledata.LoadMessages(lake)
	if err != nil {
		return nil, fmt.Errorf("evalsample: %w", err)
	}
	truth, err := sampledata.LoadTruth(truthDir)
	if err != nil {
		return nil, fmt.Errorf("evalsample: %w", err)
	}
	ids := make([]string, 0, len(msgs))
	for id := range msgs {
		if _, ok := truth[id]; ok && len(msgs[id]) > 0 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	if n > 0 && n < len(ids) {
		ids = ids[:n]
	}
	out := make([]eval.Case, 0, len(ids))
	for _, id := range ids {
		tr := truth[id]
		out = append(out, eval.Case{ID: id, Source: eval.SourceSample, Truth: &eval.Truth{Label: tr.Label, Category: tr.Category},
			Messages: msgs[id], RoomID: id})
	}
	if len(out) == 0 {
		return nil, errors.New("evalsample: the sample lake has no labelled rooms")
	}
	return out, nil
}

// Profile is one simulated endpoint of the sample report.
type Profile struct {
	Name   string
	Config llmsim.Config
	// Price is the --price text of the endpoint.
	Price string
	// Note is its --endpoint-note text: how it is (said to be) served.
	Note string
}

// Reference is the profile the sample compares the others with: the
// managed API a migration would move away from.
const Reference = "managed"

// Profiles are the three setups of the design notes, as simulators: a
// self-hosted BF16 model, the same model in FP8 (faster decode, a larger
// batch per GPU), and a managed API (slower time to first token, a slow
// image stage that fetches image URLs across regions, priced per token).
// Each has a seeded error model: the managed API and BF16 make the same
// few mistakes at the same rates (with other seeds, so on other chats),
// and FP8 is planted worse everywhere, phishing links most, so
// the report has a real difference to find. The figures are illustrative,
// not measured on any GPU or model.
func Profiles() []Profile {
	base := func(name string, ttft, itl, img time.Duration, seed int64) llmsim.Config {
		c := llmsim.DefaultConfig()
		c.Name, c.Models = name, []string{"chatguard-" + name}
		c.TTFT, c.ITL, c.ImageTTFT, c.Jitter = ttft, itl, img, 0.2
		c.TokensPerChunk = 8
		c.Version, c.MaxModelLen = "llmsim (simulated vLLM)", 32768
		c.Errors = llmsim.ErrorModel{Seed: seed, Miss: map[pipeline.Category]float64{"*": 0.03},
			FalseAlarm: map[pipeline.Category]float64{pipeline.CategorySpam: 0.01}, HardNegative: 0.05, Nondeterminism: 0.04}
		return c
	}
	managed := base("managed", 450*time.Millisecond, 5*time.Millisecond, 1500*time.Millisecond, 1)
	managed.MaxRunning, managed.ImageURLFetch = 64, 600*time.Millisecond
	managed.Version, managed.MaxModelLen = "", 0 // a managed API says neither
	fp8 := base("fp8", 100*time.Millisecond, 3500*time.Microsecond, 120*time.Millisecond, 3)
	fp8.Errors.Miss = map[pipeline.Category]float64{"*": 0.12, pipeline.CategoryPhishingLink: 0.35}
	return []Profile{
		{Name: "bf16", Config: base("bf16", 120*time.Millisecond, 6*time.Millisecond, 150*time.Millisecond, 2), Price: "gpu_hour=4.5,shared_by=32",
			Note: "simulated: dtype=bf16,kv-cache-dtype=auto,tp=1,spec-decode=off"},
		{Name: "fp8", Config: fp8, Price: "gpu_hour=4.5,shared_by=48",
			Note: "simulated: dtype=fp8,kv-cache-dtype=fp8,tp=1,spec-decode=off (planted: misses 35 % of phishing links, 12 % of the rest)"},
		{Name: "managed", Config: managed, Price: "prompt=2.5,cached=1.25,completion=10",
			Note: "simulated managed API: fetches image URLs across regions (+600ms each)"},
	}
}

// Start starts the profiles' simulators on free local ports. The caller
// stops them (Running.Stop) when done.
func Start(ctx context.Context, profiles []Profile) ([]*llmsim.Running, error) {
	var out []*llmsim.Running
	for _, p := range profiles {
		r, err := llmsim.Start(ctx, "127.0.0.1:0", p.Config)
		if err != nil {
			for _, o := range out {
				stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_ = o.Stop(stopCtx)
				cancel()
			}
			return nil, fmt.Errorf("evalsample: start %s: %w", p.Name, err)
		}
		out = append(out, r)
	}
	return out, nil
}
