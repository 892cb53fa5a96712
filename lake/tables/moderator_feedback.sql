-- The moderator_feedback table over the Parquet objects that cmd/consumer writes under
-- {{lake_location}}event_type=moderator_feedback/dt=YYYY-MM-DD/hour=HH/. Partition projection
-- computes the partitions from the key layout, so no MSCK REPAIR TABLE or
-- crawler is ever needed. Replace {{lake_location}} with the lake root, for
-- example s3://chatguard-lake/events/ (see README.md).
CREATE EXTERNAL TABLE IF NOT EXISTS moderator_feedback (
  event_id         string    COMMENT 'UUID; duplicates are possible, see the _dedup view',
  event_type       string,
  occurred_at      timestamp COMMENT 'UTC, millisecond precision; the partition is its hour',
  schema_version   int,
  received_at      timestamp COMMENT 'when the consumer received the message (UTC)',
  room_id          string,
  window_start     timestamp,
  window_end       timestamp,
  pipeline_version string,
  moderator_id     string,
  verdict_label    string    COMMENT 'what the pipeline said',
  verdict_category string,
  decided_label    string    COMMENT 'what the moderator decided',
  decided_category string,
  action_taken     string,
  audit            boolean   COMMENT 'true: the verdict was a console audit item (a randomly sampled clean verdict); null in files older than the column',
  decision         string    COMMENT 'undo: a moderator took back the decision whose event reverses_event_id names (neither counts); null on a decision',
  reverses_event_id string   COMMENT 'on an undo, the event_id of the decision undone; null otherwise'
)
PARTITIONED BY (`dt` string, `hour` string)
STORED AS PARQUET
LOCATION '{{lake_location}}event_type=moderator_feedback/'
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
  'storage.location.template' = '{{lake_location}}event_type=moderator_feedback/dt=${dt}/hour=${hour}/',
  'parquet.compression' = 'ZSTD'
)
