package standin

import (
	"net/http"
	"testing"
)

// AthenaOptions configures a private Athena stand-in.
type AthenaOptions struct {
	// LakeDir is the local folder standing for the lake bucket.
	LakeDir string
	// Bucket is the bucket name s3:// table locations may use (default
	// "lake").
	Bucket string
	// Tables maps table names to Parquet globs (relative to LakeDir,
	// absolute, or s3://<Bucket>/<glob>); nil means the stand-in's default
	// tables (chat_messages, chat_rooms and the lake's event tables).
	Tables map[string]string
}

// Athena is a private Athena stand-in process (deploy/local/athenasim:
// DuckDB over a local Parquet lake, speaking Athena's JSON protocol).
type Athena struct {
	// URL is the endpoint for the Athena client (AWS_ENDPOINT_URL_ATHENA).
	URL string
}

// StartAthena builds the stand-in and starts it on a free port over
// o.LakeDir. It is stopped when t ends.
func StartAthena(t testing.TB, o AthenaOptions) *Athena {
	t.Helper()
	args := []string{"--addr", "127.0.0.1:0", "--lake-dir", o.LakeDir}
	if o.Bucket != "" {
		args = append(args, "--bucket", o.Bucket)
	}
	for name, glob := range o.Tables {
		args = append(args, "--table", name+"="+glob)
	}
	p := Start(t, Build(t, AthenaSimCommand), args...)
	return &Athena{URL: p.URL}
}

// AthenaAdmin is the stand-in's /admin/config: its test settings and
// execution counters.
type AthenaAdmin struct {
	MinRunTime    string `json:"min_run_time"`
	FailNext      int    `json:"fail_next"`
	FailReason    string `json:"fail_reason"`
	FailRetryable bool   `json:"fail_retryable"`
	Stats         struct {
		Started   int `json:"started"`
		Succeeded int `json:"succeeded"`
		Failed    int `json:"failed"`
		Cancelled int `json:"cancelled"`
		Active    int `json:"active"`
		// Calls counts API calls by operation (StartQueryExecution,
		// GetQueryExecution, GetQueryResults, StopQueryExecution).
		Calls map[string]int `json:"calls"`
	} `json:"stats"`
}

// Configure posts a partial JSON document to /admin/config, e.g.
// {"min_run_time":"1m"} or {"fail_next":1,"fail_reason":"…"}, and returns
// the settings that result.
func (a *Athena) Configure(t testing.TB, patch string) AthenaAdmin {
	t.Helper()
	var out AthenaAdmin
	adminCall(t, http.MethodPost, a.URL+"/admin/config", patch, &out)
	return out
}

// Admin reads the settings and counters.
func (a *Athena) Admin(t testing.TB) AthenaAdmin {
	t.Helper()
	var out AthenaAdmin
	adminCall(t, http.MethodGet, a.URL+"/admin/config", "", &out)
	return out
}
