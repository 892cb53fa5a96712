-- The inference_log table over the Parquet objects that cmd/consumer writes under
-- {{lake_location}}event_type=inference_log/dt=YYYY-MM-DD/hour=HH/. Partition projection
-- computes the partitions from the key layout, so no MSCK REPAIR TABLE or
-- crawler is ever needed. Replace {{lake_location}} with the lake root, for
-- example s3://chatguard-lake/events/ (see README.md).
CREATE EXTERNAL TABLE IF NOT EXISTS inference_log (
  event_id         string    COMMENT 'UUID; duplicates are possible, see the _dedup view',
  event_type       string,
  occurred_at      timestamp COMMENT 'UTC, millisecond precision; the partition is its hour',
  schema_version   int,
  received_at      timestamp COMMENT 'when the consumer received the message (UTC)',
  room_id          string,
  window_start     timestamp,
  window_end       timestamp,
  pipeline_version string,
  run_id           string,
  stage            string    COMMENT 'triage | extract | vision | judge',
  pool             string    COMMENT 'primary | fallback',
  model            string,
  attempt          int,
  outcome          string    COMMENT 'ok | invalid | error | canceled',
  error_kind       string,
  ttft_ms          double,
  latency_ms       double,
  tokens_in        int,
  tokens_out       int,
  tokens_cached    int       COMMENT 'prompt tokens served from the prefix cache (part of tokens_in); NULL in files before token accounting',
  cost_usd         double    COMMENT 'USD at the pool prices the worker was given; NULL in files before token accounting',
  prompt_sha256    string,
  prompt_chars     int,
  messages         int,
  images           int,
  output           string    COMMENT 'validated structured answer, JSON, masked'
)
PARTITIONED BY (`dt` string, `hour` string)
STORED AS PARQUET
LOCATION '{{lake_location}}event_type=inference_log/'
TBLPROPERTIES (
  'projection.enabled' = 'true',
  'projection.dt.type' = 'date',
  'projection.dt.format' = 'yyyy-MM-dd',
  'projection.dt.range' = '2025-01-01,NOW',
  'projection.dt.interval' = '1',
  'projection.dt.interval.unit' = 'DAYS',
  'projection.hour.type' = 'integer',
  'projection.hour.range' = '0,23',
  'projection.hour.digits' = '2',
  'storage.location.template' = '{{lake_location}}event_type=inference_log/dt=${dt}/hour=${hour}/',
  'parquet.compression' = 'ZSTD'
)
