package athenasim

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

const (
	targetPrefix  = "AmazonAthena."
	jsonType      = "application/x-amz-json-1.1"
	maxBodyBytes  = 1 << 20
	maxPageRows   = 1000
	engineVersion = "Athena engine version 3"
)

// Handler returns the HTTP handler: Athena's JSON 1.1 protocol on POST /,
// plus GET /healthz and GET|POST /admin/config for tests and the local stack.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /{$}", s.serveAPI)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`+"\n")
	})
	mux.HandleFunc("GET /admin/config", s.serveAdmin)
	mux.HandleFunc("POST /admin/config", s.serveAdmin)
	return mux
}

// epoch is a timestamp as AWS JSON protocols send it: seconds since the
// epoch as a JSON number, here with millisecond precision.
type epoch time.Time

func (t epoch) MarshalJSON() ([]byte, error) {
	ms := time.Time(t).UnixMilli()
	return fmt.Appendf(nil, "%d.%03d", ms/1000, ms%1000), nil
}

type wireStartRequest struct {
	QueryString           string   `json:"QueryString"`
	ExecutionParameters   []string `json:"ExecutionParameters"`
	ClientRequestToken    string   `json:"ClientRequestToken"`
	WorkGroup             string   `json:"WorkGroup"`
	QueryExecutionContext *struct {
		Database string `json:"Database"`
		Catalog  string `json:"Catalog"`
	} `json:"QueryExecutionContext"`
	ResultConfiguration *struct {
		OutputLocation string `json:"OutputLocation"`
	} `json:"ResultConfiguration"`
}

type wireIDRequest struct {
	QueryExecutionID string `json:"QueryExecutionId"`
}

type wireResultsRequest struct {
	QueryExecutionID string `json:"QueryExecutionId"`
	NextToken        string `json:"NextToken"`
	MaxResults       *int   `json:"MaxResults"`
}

type wireAthenaError struct {
	ErrorCategory int    `json:"ErrorCategory"`
	ErrorType     int    `json:"ErrorType"`
	Retryable     bool   `json:"Retryable"`
	ErrorMessage  string `json:"ErrorMessage"`
}

type wireStatus struct {
	State              string           `json:"State"`
	StateChangeReason  string           `json:"StateChangeReason,omitempty"`
	SubmissionDateTime epoch            `json:"SubmissionDateTime"`
	CompletionDateTime *epoch           `json:"CompletionDateTime,omitempty"`
	AthenaError        *wireAthenaError `json:"AthenaError,omitempty"`
}

type wireStatistics struct {
	EngineExecutionTimeInMillis      int64 `json:"EngineExecutionTimeInMillis"`
	DataScannedInBytes               int64 `json:"DataScannedInBytes"`
	TotalExecutionTimeInMillis       int64 `json:"TotalExecutionTimeInMillis"`
	QueryQueueTimeInMillis           int64 `json:"QueryQueueTimeInMillis"`
	ServicePreProcessingTimeInMillis int64 `json:"ServicePreProcessingTimeInMillis"`
	QueryPlanningTimeInMillis        int64 `json:"QueryPlanningTimeInMillis"`
	ServiceProcessingTimeInMillis    int64 `json:"ServiceProcessingTimeInMillis"`
}

type wireQueryExecution struct {
	QueryExecutionID    string `json:"QueryExecutionId"`
	Query               string `json:"Query"`
	StatementType       string `json:"StatementType"`
	ResultConfiguration struct {
		OutputLocation string `json:"OutputLocation"`
	} `json:"ResultConfiguration"`
	QueryExecutionContext struct {
		Database string `json:"Database"`
		Catalog  string `json:"Catalog"`
	} `json:"QueryExecutionContext"`
	Status        wireStatus     `json:"Status"`
	Statistics    wireStatistics `json:"Statistics"`
	WorkGroup     string         `json:"WorkGroup"`
	EngineVersion struct {
		SelectedEngineVersion  string `json:"SelectedEngineVersion"`
		EffectiveEngineVersion string `json:"EffectiveEngineVersion"`
	} `json:"EngineVersion"`
	ExecutionParameters []string `json:"ExecutionParameters,omitempty"`
}

type wireDatum struct {
	VarCharValue *string `json:"VarCharValue,omitempty"`
}

type wireRow struct {
	Data []wireDatum `json:"Data"`
}

type wireResults struct {
	ResultSet struct {
		ResultSetMetadata struct {
			ColumnInfo []columnInfo `json:"ColumnInfo"`
		} `json:"ResultSetMetadata"`
		Rows []wireRow `json:"Rows"`
	} `json:"ResultSet"`
	NextToken   string `json:"NextToken,omitempty"`
	UpdateCount int64  `json:"UpdateCount"`
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("x-amzn-RequestId", uuid.NewString())
	target := r.Header.Get("X-Amz-Target")
	op, ok := strings.CutPrefix(target, targetPrefix)
	if !ok {
		writeAWSError(w, http.StatusBadRequest, &apiError{typ: "UnknownOperationException", msg: fmt.Sprintf("unknown target %q", target)})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil || len(body) > maxBodyBytes {
		writeAWSError(w, http.StatusBadRequest, invalid("request body unreadable or over %d bytes", maxBodyBytes))
		return
	}
	switch op {
	case "StartQueryExecution", "GetQueryExecution", "GetQueryResults", "StopQueryExecution":
		s.countCall(op)
	}
	var out any
	switch op {
	case "StartQueryExecution":
		out, err = s.opStart(body)
	case "GetQueryExecution":
		out, err = s.opGet(body)
	case "GetQueryResults":
		out, err = s.opResults(body)
	case "StopQueryExecution":
		out, err = s.opStop(body)
	default:
		err = &apiError{typ: "UnknownOperationException", msg: "athenasim does not implement " + op}
	}
	if err != nil {
		status := http.StatusBadRequest
		var ae *apiError
		if errors.As(err, &ae) && ae.typ == "InternalServerException" {
			status = http.StatusInternalServerError
		}
		writeAWSError(w, status, err)
		return
	}
	b, err := json.Marshal(out)
	if err != nil {
		writeAWSError(w, http.StatusInternalServerError, &apiError{typ: "InternalServerException", msg: "encode response"})
		return
	}
	w.Header().Set("Content-Type", jsonType)
	_, _ = w.Write(b)
}

func writeAWSError(w http.ResponseWriter, status int, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = &apiError{typ: "InvalidRequestException", msg: err.Error()}
	}
	b, _ := json.Marshal(map[string]string{"__type": ae.typ, "Message": ae.msg})
	w.Header().Set("Content-Type", jsonType)
	w.Header().Set("X-Amzn-ErrorType", ae.typ)
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func decode(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return invalid("malformed request: %v", err)
	}
	return nil
}

func (s *Server) opStart(body []byte) (any, error) {
	var req wireStartRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	sr := startRequest{query: req.QueryString, params: req.ExecutionParameters, token: req.ClientRequestToken, workGroup: req.WorkGroup}
	if c := req.QueryExecutionContext; c != nil {
		sr.database = c.Database
	}
	if c := req.ResultConfiguration; c != nil {
		sr.output = c.OutputLocation
	}
	id, err := s.start(sr)
	if err != nil {
		return nil, err
	}
	return map[string]string{"QueryExecutionId": id}, nil
}

func (s *Server) opGet(body []byte) (any, error) {
	var req wireIDRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	e, err := s.snapshot(req.QueryExecutionID)
	if err != nil {
		return nil, err
	}
	var qe wireQueryExecution
	qe.QueryExecutionID, qe.Query, qe.StatementType, qe.WorkGroup = e.id, e.query, e.statementType, e.workGroup
	qe.ResultConfiguration.OutputLocation = e.output
	qe.QueryExecutionContext.Database, qe.QueryExecutionContext.Catalog = e.database, "AwsDataCatalog"
	qe.EngineVersion.SelectedEngineVersion, qe.EngineVersion.EffectiveEngineVersion = "AUTO", engineVersion
	qe.ExecutionParameters = e.params
	qe.Status = wireStatus{State: e.state, StateChangeReason: e.reason, SubmissionDateTime: epoch(e.submitted)}
	end := time.Now().UTC()
	if e.terminal() {
		end = e.completed
		c := epoch(e.completed)
		qe.Status.CompletionDateTime = &c
	}
	if e.state == StateFailed {
		qe.Status.AthenaError = &wireAthenaError{ErrorCategory: e.errCategory, ErrorType: 1000, Retryable: e.retryable, ErrorMessage: e.reason}
	}
	started := e.started
	if started.IsZero() {
		started = end
	}
	qe.Statistics = wireStatistics{
		EngineExecutionTimeInMillis: end.Sub(started).Milliseconds(),
		DataScannedInBytes:          e.scannedBytes,
		TotalExecutionTimeInMillis:  end.Sub(e.submitted).Milliseconds(),
		QueryQueueTimeInMillis:      started.Sub(e.submitted).Milliseconds(),
	}
	return map[string]any{"QueryExecution": qe}, nil
}

func (s *Server) opStop(body []byte) (any, error) {
	var req wireIDRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if err := s.stop(req.QueryExecutionID); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

func (s *Server) opResults(body []byte) (any, error) {
	var req wireResultsRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	limit := maxPageRows
	if req.MaxResults != nil {
		if *req.MaxResults < 1 || *req.MaxResults > maxPageRows {
			return nil, invalid("MaxResults %d is outside 1..%d", *req.MaxResults, maxPageRows)
		}
		limit = *req.MaxResults
	}
	e, err := s.snapshot(req.QueryExecutionID)
	if err != nil {
		return nil, err
	}
	switch e.state {
	case StateSucceeded:
	case StateFailed, StateCancelled:
		return nil, invalid("Query did not finish successfully. Final query state: %s\n%s", e.state, e.reason)
	default:
		return nil, invalid("Query has not yet finished. Current state: %s", e.state)
	}
	// The header row (column names) is row 0 of the first page and counts
	// towards MaxResults, as in Athena.
	total := len(e.rows) + 1
	offset := 0
	if req.NextToken != "" {
		if offset, err = parseToken(req.NextToken, e.id, total); err != nil {
			return nil, err
		}
	}
	var out wireResults
	out.ResultSet.ResultSetMetadata.ColumnInfo = e.columns
	out.ResultSet.Rows = []wireRow{}
	end := min(offset+limit, total)
	for i := offset; i < end; i++ {
		var data []wireDatum
		if i == 0 {
			data = make([]wireDatum, len(e.columns))
			for j, c := range e.columns {
				data[j] = wireDatum{VarCharValue: &c.Name}
			}
		} else {
			row := e.rows[i-1]
			data = make([]wireDatum, len(row))
			for j, v := range row {
				data[j] = wireDatum{VarCharValue: v}
			}
		}
		out.ResultSet.Rows = append(out.ResultSet.Rows, wireRow{Data: data})
	}
	if end < total {
		out.NextToken = makeToken(e.id, end)
	}
	return out, nil
}

func makeToken(id string, offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(id + ":" + strconv.Itoa(offset)))
}

func parseToken(tok, id string, total int) (int, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return 0, invalid("NextToken is malformed")
	}
	tid, off, ok := strings.Cut(string(b), ":")
	n, err := strconv.Atoi(off)
	if !ok || err != nil || tid != id || n < 1 || n >= total {
		return 0, invalid("NextToken does not belong to this query's results")
	}
	return n, nil
}

// adminConfig is the JSON of /admin/config; every field is optional on POST.
type adminConfig struct {
	MinRunTime    *string `json:"min_run_time,omitempty"`
	FailNext      *int    `json:"fail_next,omitempty"`
	FailReason    *string `json:"fail_reason,omitempty"`
	FailRetryable *bool   `json:"fail_retryable,omitempty"`
	Stats         *Stats  `json:"stats,omitempty"`
}

func (s *Server) serveAdmin(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodPost {
		var req adminConfig
		dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "malformed admin config: " + err.Error()})
			return
		}
		if req.MinRunTime != nil {
			d, err := time.ParseDuration(*req.MinRunTime)
			if err != nil || d < 0 {
				w.WriteHeader(http.StatusBadRequest)
				_ = json.NewEncoder(w).Encode(map[string]string{"error": "min_run_time must be a non-negative Go duration such as 2s"})
				return
			}
			s.SetMinRunTime(d)
		}
		if req.FailNext != nil {
			s.mu.Lock()
			reason, retry := s.failReason, s.failRetryable
			s.mu.Unlock()
			if req.FailReason != nil {
				reason = *req.FailReason
			}
			if req.FailRetryable != nil {
				retry = *req.FailRetryable
			}
			s.FailNext(*req.FailNext, reason, retry)
		}
	}
	st := s.Stats()
	s.mu.Lock()
	mrt, fn, fr, fre := s.minRunTime.String(), s.failNext, s.failReason, s.failRetryable
	s.mu.Unlock()
	_ = json.NewEncoder(w).Encode(adminConfig{MinRunTime: &mrt, FailNext: &fn, FailReason: &fr, FailRetryable: &fre, Stats: &st})
}

// countCall counts one API call of op in Stats.Calls.
func (s *Server) countCall(op string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls == nil {
		s.calls = map[string]int{}
	}
	s.calls[op]++
}
