package jobloop

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestJobOutcomesExistAtZero: a fresh worker exports every job outcome at
// zero, so "no verdict in an hour" (increase of outcome="done") has a series
// to evaluate on a fleet that never saved one, instead of none at all.
func TestJobOutcomesExistAtZero(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := NewMetrics(reg)
	if got := testutil.CollectAndCount(m.jobs, "chatguard_worker_jobs_total"); got != len(jobOutcomes) {
		t.Fatalf("chatguard_worker_jobs_total has %d series before any job, want %d (one per outcome)", got, len(jobOutcomes))
	}
	for _, o := range []string{"done", "failed", "failed_final", "poison", "panic"} {
		if v := testutil.ToFloat64(m.jobs.WithLabelValues(o)); v != 0 {
			t.Errorf("outcome %q starts at %v, want 0", o, v)
		}
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range fams {
		if f.GetName() != "chatguard_worker_jobs_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				found = found || (l.GetName() == "outcome" && l.GetValue() == "done")
			}
		}
	}
	if !found {
		t.Fatal(`the registry does not expose chatguard_worker_jobs_total{outcome="done"} before the first verdict`)
	}
}

// TestJobOutcomesListEveryLabel keeps jobOutcomes complete: every outcome
// label the package's code can give a job is in it, so each is exported
// from the start.
func TestJobOutcomesListEveryLabel(t *testing.T) {
	// The review job's labels end jobs of this loop too.
	var files []string
	for _, pattern := range []string{"*.go", "../reviewjob/*.go"} {
		more, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, more...)
	}
	literal := regexp.MustCompile(`Label(?::| =) "([a-z_]+)"|jobs\.WithLabelValues\("([a-z_]+)"\)`)
	defaults := regexp.MustCompile(`Label = \[\.\.\.\]string\{([^}]*)\}`)
	seen := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var labels []string
		for _, m := range literal.FindAllStringSubmatch(string(b), -1) {
			labels = append(labels, m[1]+m[2])
		}
		for _, m := range defaults.FindAllStringSubmatch(string(b), -1) {
			for _, q := range strings.Split(m[1], ",") {
				labels = append(labels, strings.Trim(strings.TrimSpace(q), `"`))
			}
		}
		for _, l := range labels {
			seen++
			if !slices.Contains(jobOutcomes, l) {
				t.Errorf("%s: job outcome %q is not in jobOutcomes (its series would not exist until first used)", f, l)
			}
		}
	}
	if seen < 10 {
		t.Fatalf("found only %d outcome labels in the source: the patterns no longer match the code", seen)
	}
}
