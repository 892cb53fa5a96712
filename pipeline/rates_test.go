package pipeline

// TestEventRates prints the share of the event corpus the worker handles
// right (valid events admitted, invalid ones dead-lettered), the figure of
// docs/performance.md's table. admit is the worker's admission (rates_admit_test.go),
// so the same file measures the code before and after the hostile-input
// defences:
//
//	go test ./pipeline -run TestEventRates -v

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

func TestEventRates(t *testing.T) {
	t.Parallel()
	f, err := os.Open("testdata/events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type row struct {
		Technique string    `json:"technique"`
		Now       time.Time `json:"now"`
		Body      string    `json:"body"`
		Valid     bool      `json:"valid"`
	}
	type tally struct{ n, ok int }
	fam := map[string]*tally{}
	var order []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	all := tally{}
	for sc.Scan() {
		var r row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		k, _, _ := strings.Cut(r.Technique, "/")
		if fam[k] == nil {
			fam[k] = &tally{}
			order = append(order, k)
		}
		right := (admit([]byte(r.Body), r.Now) == nil) == r.Valid
		fam[k].n++
		all.n++
		if right {
			fam[k].ok++
			all.ok++
		}
	}
	for _, k := range order {
		t.Logf("events %-9s handled right %2d/%2d", k, fam[k].ok, fam[k].n)
	}
	t.Logf("events %-9s handled right %2d/%2d (%.1f%%)", "all", all.ok, all.n, 100*float64(all.ok)/float64(all.n))
}
