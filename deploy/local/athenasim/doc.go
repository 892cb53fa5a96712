// Package athenasim is a development stand-in for Amazon Athena, not
// Athena: it speaks enough of Athena's JSON 1.1 protocol
// (StartQueryExecution, GetQueryExecution, GetQueryResults,
// StopQueryExecution) for the real aws-sdk-go-v2 Athena client, and runs the
// queries with DuckDB over Hive-partitioned Parquet files in a local
// directory that stands for the S3 lake bucket.
//
// What it does like Athena: asynchronous executions with QUEUED, RUNNING,
// SUCCEEDED, FAILED and CANCELLED states and a StateChangeReason; positional
// '?' ExecutionParameters given as SQL literals (bound as typed values, never
// spliced into the SQL); results as strings with a header row first on the
// first page, NextToken pagination and MaxResults up to 1000; Athena type
// names and timestamp formatting (2026-11-01 00:00:00.000); partition
// columns (dt, hour, event_type) as strings; ClientRequestToken idempotency.
//
// What differs: the SQL dialect is DuckDB's, not Trino's (the common subset
// — SELECT, WHERE, GROUP BY, aggregates, CASE, CAST, TIMESTAMP and DATE
// literals — behaves the same, and to_iso8601, from_iso8601_timestamp,
// to_unixtime and from_unixtime are provided as macros); only read-only
// statements run; one database
// (default "chatguard") whose tables come from Config.Tables; results stay in
// memory and nothing is written to the output location; there is no auth.
//
// For tests: Config.MinRunTime (also SetMinRunTime and POST /admin/config
// {"min_run_time":"2s"}) keeps queries RUNNING for a while so that polling,
// timeouts and StopQueryExecution can be exercised; FailNext (or
// {"fail_next":1,"fail_reason":"...","fail_retryable":true}) forces failures.
package athenasim
