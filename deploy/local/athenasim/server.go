package athenasim

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/duckdb/duckdb-go/v2"
	"github.com/google/uuid"
)

// Query states, as Athena names them.
const (
	StateQueued    = "QUEUED"
	StateRunning   = "RUNNING"
	StateSucceeded = "SUCCEEDED"
	StateFailed    = "FAILED"
	StateCancelled = "CANCELLED"
)

// Athena error categories carried in Status.AthenaError.
const (
	errCategorySystem = 1
	errCategoryUser   = 2
)

// closeWait bounds how long Close waits for running queries to notice
// their cancellation (DuckDB is interrupted every 500ms).
const closeWait = 15 * time.Second

// execution is one query execution. Guarded by Server.mu except result
// fields, which are written once before the state becomes terminal.
type execution struct {
	id, query, database, workGroup, output, token string
	params                                        []string
	statementType                                 string

	state, reason      string
	errCategory        int
	retryable          bool
	submitted, started time.Time
	completed          time.Time
	scannedBytes       int64
	cancel             context.CancelFunc
	columns            []columnInfo
	rows               [][]*string

	// admit closes when the execution gets a run slot; admitted records
	// that it did, so that its release frees the slot.
	admit    chan struct{}
	admitted bool
}

func (e *execution) terminal() bool {
	return e.state == StateSucceeded || e.state == StateFailed || e.state == StateCancelled
}

// Stats counts executions, for tests and the admin endpoint.
type Stats struct {
	Started   int `json:"started"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"`
	Active    int `json:"active"` // queued or running now
	Retained  int `json:"retained"`
	// Calls counts API calls by operation (StartQueryExecution,
	// GetQueryExecution, GetQueryResults, StopQueryExecution), so that a
	// test can assert which calls a client made.
	Calls map[string]int `json:"calls"`
}

// Server is the Athena stand-in. Create it with New, serve Handler, and
// Close it to stop every query it runs.
type Server struct {
	cfg    Config
	db     *sql.DB
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	viewMu sync.Mutex
	views  map[string]uint64 // table → fingerprint of the files its view was built from

	mu            sync.Mutex
	closed        bool
	execs         map[string]*execution
	finished      []string // ids in the order they finished, for eviction
	tokens        map[string]string
	active        int
	waiting       []*execution // queued executions in submission order
	running       int          // executions holding a run slot
	minRunTime    time.Duration
	failNext      int
	failReason    string
	failRetryable bool
	stats         Stats
	calls         map[string]int // API calls by operation, for Stats
}

// New validates cfg, opens an in-memory DuckDB and returns a server. It
// fails on an invalid configuration or when DuckDB cannot be set up.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("athenasim: %w", err)
	}
	conn, err := duckdb.NewConnector("", func(ex driver.ExecerContext) error {
		// Session settings for every pooled connection: timestamps are UTC
		// instants as in Athena, whatever the host's zone.
		_, err := ex.ExecContext(context.Background(), "SET TimeZone = 'UTC'", nil)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("athenasim: open duckdb: %w", err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(cfg.MaxConcurrent + 2)
	if err := setupDB(db, cfg); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("athenasim: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		cfg: cfg, db: db, ctx: ctx, cancel: cancel,
		views: map[string]uint64{}, execs: map[string]*execution{}, tokens: map[string]string{},
		minRunTime: cfg.MinRunTime,
	}, nil
}

// setupDB creates the database's schema and confines DuckDB's file access
// to the table locations, so that a query cannot read arbitrary local files.
func setupDB(db *sql.DB, cfg Config) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dirs := map[string]bool{}
	for _, loc := range cfg.Tables {
		glob, _ := cfg.resolve(loc)
		dirs[globRoot(glob)] = true
	}
	quoted := make([]string, 0, len(dirs))
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		quoted = append(quoted, sqlString(d+string(filepath.Separator)))
	}
	schema := quoteIdent(cfg.Database)
	for _, stmt := range []string{
		"CREATE SCHEMA IF NOT EXISTS " + schema,
		// A few Trino functions the batch's SQL may use, so that the same
		// text runs here and on Athena.
		"CREATE MACRO " + schema + ".to_iso8601(ts) AS strftime(CAST(ts AS TIMESTAMP), '%Y-%m-%dT%H:%M:%S.%g')",
		"CREATE MACRO " + schema + ".from_iso8601_timestamp(s) AS CAST(CAST(s AS TIMESTAMPTZ) AS TIMESTAMP)",
		"CREATE MACRO " + schema + ".to_unixtime(ts) AS epoch(CAST(ts AS TIMESTAMP))",
		"CREATE MACRO " + schema + ".from_unixtime(x) AS CAST(to_timestamp(x) AS TIMESTAMP)",
		"SET allowed_directories = [" + strings.Join(quoted, ", ") + "]",
		"SET enable_external_access = false",
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("setup duckdb: %w", err)
		}
	}
	return nil
}

// globRoot is the directory part of a glob before its first wildcard.
func globRoot(glob string) string {
	i := strings.IndexAny(glob, "*?[{")
	if i < 0 {
		return filepath.Dir(glob)
	}
	return filepath.Dir(glob[:i] + "x")
}

// SetMinRunTime changes the artificial minimum run time of queries started
// from now on and of running ones still waiting it out.
func (s *Server) SetMinRunTime(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.minRunTime = max(d, 0)
}

// FailNext makes the next n queries fail with reason instead of running;
// retryable sets Status.AthenaError.Retryable (and the SYSTEM category).
func (s *Server) FailNext(n int, reason string, retryable bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext = max(n, 0)
	s.failReason = reason
	s.failRetryable = retryable
}

// Stats returns the execution counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Active = s.active
	st.Retained = len(s.execs)
	st.Calls = maps.Clone(s.calls)
	if st.Calls == nil {
		st.Calls = map[string]int{}
	}
	return st
}

// Close cancels every queued and running query, waits (bounded) for them to
// stop and closes DuckDB. Later API calls fail. It is safe to call twice.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	now := time.Now().UTC()
	for _, e := range s.execs {
		if !e.terminal() {
			s.finishLocked(e, StateCancelled, "athenasim: server closed", 0, false, now)
		}
	}
	s.mu.Unlock()
	s.cancel()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-time.After(closeWait):
		err = errors.New("athenasim: close: queries still running after " + closeWait.String())
	}
	if cerr := s.db.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("athenasim: close: %w", cerr)
	}
	return err
}

// startRequest is what StartQueryExecution needs, decoded from the wire.
type startRequest struct {
	query, database, workGroup, output, token string
	params                                    []string
}

// apiError is an error answered as an AWS JSON error.
type apiError struct {
	typ, msg string
}

func (e *apiError) Error() string { return e.typ + ": " + e.msg }

func invalid(format string, args ...any) error {
	return &apiError{typ: "InvalidRequestException", msg: fmt.Sprintf(format, args...)}
}

// start registers a query and launches its goroutine.
func (s *Server) start(req startRequest) (string, error) {
	if strings.TrimSpace(req.query) == "" {
		return "", invalid("QueryString is missing")
	}
	if len(req.query) > 262144 {
		return "", invalid("QueryString is longer than 262144 bytes")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", &apiError{typ: "InternalServerException", msg: "server closed"}
	}
	if req.token != "" {
		if id, ok := s.tokens[req.token]; ok {
			if e := s.execs[id]; e != nil && (e.query != req.query || !slices.Equal(e.params, req.params)) {
				return "", invalid("Idempotent parameters do not match")
			}
			return id, nil
		}
	}
	if s.active >= s.cfg.MaxQueued {
		return "", &apiError{typ: "TooManyRequestsException", msg: fmt.Sprintf("too many queries queued or running (%d)", s.active)}
	}
	if req.database == "" {
		req.database = s.cfg.Database
	}
	if req.workGroup == "" {
		req.workGroup = DefaultWorkGroup
	}
	if req.output == "" {
		req.output = s.cfg.OutputLocation
	}
	id := uuid.NewString()
	ctx, cancel := context.WithCancel(s.ctx)
	e := &execution{
		id: id, query: req.query, database: strings.ToLower(req.database), workGroup: req.workGroup,
		output: strings.TrimSuffix(req.output, "/") + "/" + id + ".csv", token: req.token,
		params: slices.Clone(req.params), state: StateQueued, submitted: time.Now().UTC(), cancel: cancel,
		statementType: "DML", admit: make(chan struct{}),
	}
	var forced string
	var forcedRetryable bool
	if s.failNext > 0 {
		s.failNext--
		forced, forcedRetryable = s.failReason, s.failRetryable
		if forced == "" {
			forced = "athenasim: injected failure"
		}
	}
	s.execs[id] = e
	if req.token != "" {
		s.tokens[req.token] = id
	}
	s.active++
	s.stats.Started++
	s.waiting = append(s.waiting, e)
	s.admitLocked()
	s.wg.Add(1)
	go s.run(ctx, e, forced, forcedRetryable)
	return id, nil
}

// run is the goroutine of one execution; the server owns it through ctx
// (cancelled by Stop or Close) and wg.
func (s *Server) run(ctx context.Context, e *execution, forced string, forcedRetryable bool) {
	defer s.wg.Done()
	defer e.cancel()
	defer s.release(e)
	select {
	case <-e.admit:
	case <-ctx.Done():
		return // Stop or Close already recorded the outcome.
	}

	s.mu.Lock()
	if e.terminal() {
		s.mu.Unlock()
		return
	}
	e.state, e.started = StateRunning, time.Now().UTC()
	s.mu.Unlock()

	var (
		cols    []columnInfo
		rows    [][]*string
		scanned int64
		err     error
		userEr  = true
	)
	if forced != "" {
		err, userEr = errors.New(forced), !forcedRetryable
	} else {
		cols, rows, scanned, err = s.execute(ctx, e)
	}
	if ctx.Err() != nil {
		return
	}
	// Hold the query RUNNING for the artificial minimum run time, re-reading
	// it so that a change at run time applies at once.
	for {
		s.mu.Lock()
		wait := time.Until(e.started.Add(s.minRunTime))
		s.mu.Unlock()
		if wait <= 0 {
			break
		}
		t := time.NewTimer(min(wait, 50*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.terminal() {
		return
	}
	now := time.Now().UTC()
	e.scannedBytes = scanned
	if err != nil {
		cat := errCategoryUser
		if !userEr {
			cat = errCategorySystem
		}
		s.finishLocked(e, StateFailed, err.Error(), cat, !userEr, now)
		return
	}
	e.columns, e.rows = cols, rows
	s.finishLocked(e, StateSucceeded, "", 0, false, now)
}

// admitLocked hands free run slots to queued executions in the order they
// were submitted, as Athena runs a workgroup's queue: a goroutine race must
// not let a later query overtake an earlier one. Callers hold s.mu.
func (s *Server) admitLocked() {
	for s.running < s.cfg.MaxConcurrent && len(s.waiting) > 0 {
		e := s.waiting[0]
		s.waiting = s.waiting[1:]
		e.admitted = true
		s.running++
		close(e.admit)
	}
}

// release gives back e's run slot, or takes e off the queue when it was
// cancelled before it got one, and admits the next execution.
func (s *Server) release(e *execution) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.admitted {
		s.running--
	} else {
		s.waiting = slices.DeleteFunc(s.waiting, func(w *execution) bool { return w == e })
	}
	s.admitLocked()
}

// finishLocked moves e to a terminal state and evicts the oldest finished
// executions beyond MaxRetained. Callers hold s.mu.
func (s *Server) finishLocked(e *execution, state, reason string, category int, retryable bool, now time.Time) {
	e.state, e.reason, e.errCategory, e.retryable, e.completed = state, strings.TrimSpace(reason), category, retryable, now
	if e.started.IsZero() {
		e.started = now
	}
	e.cancel()
	s.active--
	switch state {
	case StateSucceeded:
		s.stats.Succeeded++
	case StateFailed:
		s.stats.Failed++
	case StateCancelled:
		s.stats.Cancelled++
	}
	s.finished = append(s.finished, e.id)
	for len(s.finished) > s.cfg.MaxRetained {
		old := s.execs[s.finished[0]]
		if old != nil && old.token != "" {
			delete(s.tokens, old.token)
		}
		delete(s.execs, s.finished[0])
		s.finished = s.finished[1:]
	}
}

// stop cancels a queued or running query; stopping a finished one is a
// no-op, as in Athena.
func (s *Server) stop(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.execs[id]
	if !ok {
		return invalid("QueryExecution %s was not found", id)
	}
	if !e.terminal() {
		s.finishLocked(e, StateCancelled, "Query was cancelled by user", 0, false, time.Now().UTC())
	}
	return nil
}

// snapshot copies an execution's fields under the lock.
func (s *Server) snapshot(id string) (execution, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.execs[id]
	if !ok {
		return execution{}, invalid("QueryExecution %s was not found", id)
	}
	return *e, nil
}

var readOnlyStatements = map[string]string{
	"SELECT": "DML", "WITH": "DML", "VALUES": "DML", "TABLE": "DML",
	"SHOW": "UTILITY", "DESCRIBE": "UTILITY", "EXPLAIN": "UTILITY",
}

// execute runs the query on its own DuckDB connection and returns the
// columns, the formatted rows and the bytes of the files its tables cover.
func (s *Server) execute(ctx context.Context, e *execution) ([]columnInfo, [][]*string, int64, error) {
	sc, err := scanSQL(e.query)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("SYNTAX_ERROR: %w", err)
	}
	if sc.multiple {
		return nil, nil, 0, errors.New("INVALID_INPUT: only one SQL statement is allowed")
	}
	st, ok := readOnlyStatements[sc.firstWord]
	if !ok {
		return nil, nil, 0, fmt.Errorf("NOT_SUPPORTED: athenasim runs read-only statements only (SELECT, WITH, VALUES, SHOW, DESCRIBE, EXPLAIN), not %q", sc.firstWord)
	}
	s.mu.Lock()
	e.statementType = st
	s.mu.Unlock()
	if e.database != s.cfg.Database {
		return nil, nil, 0, fmt.Errorf("SCHEMA_NOT_FOUND: database %q does not exist (athenasim serves %q)", e.database, s.cfg.Database)
	}
	sqlText, args, err := bindQuery(e.query, sc, e.params)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("INVALID_PARAMETER: %w", err)
	}
	var scanned int64
	seen := map[string]bool{}
	for _, id := range sc.idents {
		if _, ok := s.cfg.Tables[id]; !ok || seen[id] {
			continue
		}
		seen[id] = true
		n, err := s.ensureView(ctx, id)
		if err != nil {
			return nil, nil, 0, err
		}
		scanned += n
	}

	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("INTERNAL_ERROR: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET search_path = "+sqlString(s.cfg.Database)); err != nil {
		return nil, nil, 0, fmt.Errorf("INTERNAL_ERROR: %w", err)
	}
	rows, err := conn.QueryContext(ctx, sqlText, args...)
	if err != nil {
		return nil, nil, 0, queryError(err)
	}
	defer rows.Close()
	cts, err := rows.ColumnTypes()
	if err != nil {
		return nil, nil, 0, queryError(err)
	}
	cols := make([]columnInfo, len(cts))
	for i, ct := range cts {
		cols[i] = athenaType(ct)
	}
	var out [][]*string
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if len(out) >= s.cfg.MaxResultRows {
			return nil, nil, 0, fmt.Errorf("EXCEEDED_LIMIT: the result has more than %d rows, the stand-in's limit", s.cfg.MaxResultRows)
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, nil, 0, queryError(err)
		}
		row := make([]*string, len(cols))
		for i, v := range vals {
			if str, ok := formatValue(v, cols[i].duck); ok {
				row[i] = &str
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, 0, queryError(err)
	}
	return cols, out, scanned, nil
}

func queryError(err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("GENERIC_USER_ERROR: %w", err)
}

// ensureView (re)creates a table's view when its files changed and returns
// their total size. A table with no files fails the query with a clear
// reason instead of DuckDB's "no files found".
func (s *Server) ensureView(ctx context.Context, table string) (int64, error) {
	glob, err := s.cfg.resolve(s.cfg.Tables[table])
	if err != nil {
		return 0, fmt.Errorf("INTERNAL_ERROR: table %s: %w", table, err)
	}
	files, err := filepath.Glob(glob)
	if err != nil {
		return 0, fmt.Errorf("INTERNAL_ERROR: table %s: %w", table, err)
	}
	if len(files) == 0 {
		return 0, fmt.Errorf("NO_DATA: table %s.%s has no data yet: no files match %s", s.cfg.Database, table, s.cfg.Tables[table])
	}
	slices.Sort(files)
	h := fnv.New64a()
	var size int64
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			continue // removed since the glob; the view rebuild will notice
		}
		size += st.Size()
		fmt.Fprintf(h, "%s\x00%d\x00%d\n", f, st.Size(), st.ModTime().UnixNano())
	}
	fp := h.Sum64()

	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	if s.views[table] == fp {
		return size, nil
	}
	src := fmt.Sprintf("read_parquet(%s, hive_partitioning = true, union_by_name = true, hive_types_autocast = false)", sqlString(glob))
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("INTERNAL_ERROR: %w", err)
	}
	defer conn.Close()
	rows, err := conn.QueryContext(ctx, "DESCRIBE SELECT * FROM "+src)
	if err != nil {
		return 0, fmt.Errorf("GENERIC_USER_ERROR: table %s: %w", table, err)
	}
	var replace []string
	for rows.Next() {
		var name, typ string
		var null, key, def, extra sql.NullString
		if err := rows.Scan(&name, &typ, &null, &key, &def, &extra); err != nil {
			rows.Close()
			return 0, fmt.Errorf("INTERNAL_ERROR: describe %s: %w", table, err)
		}
		// Parquet UTC-adjusted timestamps read as TIMESTAMPTZ; Athena sees
		// them as plain timestamps, and comparisons with TIMESTAMP
		// parameters must not depend on a session zone.
		if typ == "TIMESTAMP WITH TIME ZONE" {
			replace = append(replace, fmt.Sprintf("CAST(%s AS TIMESTAMP) AS %s", quoteIdent(name), quoteIdent(name)))
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, fmt.Errorf("INTERNAL_ERROR: describe %s: %w", table, err)
	}
	sel := "*"
	if len(replace) > 0 {
		sel = "* REPLACE (" + strings.Join(replace, ", ") + ")"
	}
	stmt := fmt.Sprintf("CREATE OR REPLACE VIEW %s.%s AS SELECT %s FROM %s", quoteIdent(s.cfg.Database), quoteIdent(table), sel, src)
	if _, err := conn.ExecContext(ctx, stmt); err != nil {
		return 0, fmt.Errorf("INTERNAL_ERROR: create view %s: %w", table, err)
	}
	s.views[table] = fp
	return size, nil
}

func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
