-- The shadow_verdict table over the Parquet objects that cmd/consumer writes under
-- {{lake_location}}event_type=shadow_verdict/dt=YYYY-MM-DD/hour=HH/: one row per
-- shadow review, a candidate endpoint's answer on a live review's window, keyed
-- by the live review key (it joins verdict on room_id, window_start, window_end,
-- pipeline_version). A stage's columns are NULL when the candidate did not run it.
-- Partition projection computes the partitions from the key layout. Replace
-- {{lake_location}} with the lake root, for example s3://chatguard-lake/events/.
CREATE EXTERNAL TABLE IF NOT EXISTS shadow_verdict (
  event_id                   string    COMMENT 'UUID from the review key and the candidate; see the _dedup view',
  event_type                 string,
  occurred_at                timestamp COMMENT 'UTC, millisecond precision; the partition is its hour',
  schema_version             int,
  received_at                timestamp COMMENT 'when the consumer received the message (UTC)',
  room_id                    string,
  window_start               timestamp,
  window_end                 timestamp,
  pipeline_version           string    COMMENT 'the live side''s, as in the review key',
  run_id                     string,
  candidate                  string    COMMENT 'the candidate endpoint''s configured name',
  candidate_model            string,
  candidate_pipeline_version string,
  outcome                    string    COMMENT 'ok | error | canceled',
  error_kind                 string,
  live_label                 string    COMMENT 'the committed live verdict''s label',
  live_category              string,
  label                      string    COMMENT 'the candidate''s label; NULL unless outcome is ok',
  category                   string,
  severity                   int,
  confidence                 double,
  action                     string,
  early_exit                 boolean,
  text_differs               boolean   COMMENT 'the candidate saw other text than the live path (pseudonymised)',
  latency_ms                 double,
  cost_usd                   double,
  triage_tokens_in           int,
  triage_tokens_out          int,
  triage_latency_ms          double,
  extract_tokens_in          int,
  extract_tokens_out         int,
  extract_latency_ms         double,
  vision_tokens_in           int,
  vision_tokens_out          int,
  vision_latency_ms          double,
  judge_tokens_in            int,
  judge_tokens_out           int,
  judge_latency_ms           double
)
PARTITIONED BY (`dt` string, `hour` string)
STORED AS PARQUET
LOCATION '{{lake_location}}event_type=shadow_verdict/'
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
  'storage.location.template' = '{{lake_location}}event_type=shadow_verdict/dt=${dt}/hour=${hour}/',
  'parquet.compression' = 'ZSTD'
)
