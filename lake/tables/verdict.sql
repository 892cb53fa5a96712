-- The verdict table over the Parquet objects that cmd/consumer writes under
-- {{lake_location}}event_type=verdict/dt=YYYY-MM-DD/hour=HH/. Partition projection
-- computes the partitions from the key layout, so no MSCK REPAIR TABLE or
-- crawler is ever needed. Replace {{lake_location}} with the lake root, for
-- example s3://chatguard-lake/events/ (see README.md).
CREATE EXTERNAL TABLE IF NOT EXISTS verdict (
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
  status           string    COMMENT 'done | expired | stopped | failed',
  label            string    COMMENT 'abusive | suspicious | clean',
  category         string,
  severity         int,
  confidence       double,
  action           string,
  early_exit       boolean,
  fallback_used    boolean,
  attempts         int,
  latency_ms       double,
  subjects         string    COMMENT 'keyed pseudonyms (hmac:…) of the accounts the verdict is about, comma-separated; null before subjects existed',
  campaigns        string    COMMENT 'campaign signals, a JSON array of {kind, mark, rooms, senders} (marks are keyed pseudonyms); null when none or before campaigns existed',
  account_history  string    COMMENT 'account history the review was shown, JSON {status, days, lines: [{role, label, category, overturned, rooms}], accounts_left_out}; roles and counts, never ids; null when off or before it was recorded'
)
PARTITIONED BY (`dt` string, `hour` string)
STORED AS PARQUET
LOCATION '{{lake_location}}event_type=verdict/'
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
  'storage.location.template' = '{{lake_location}}event_type=verdict/dt=${dt}/hour=${hour}/',
  'parquet.compression' = 'ZSTD'
)
