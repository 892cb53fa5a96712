-- The protective_action table over the Parquet objects that cmd/consumer writes under
-- {{lake_location}}event_type=protective_action/dt=YYYY-MM-DD/hour=HH/: two rows per
-- protective action (docs/actions.md). phase 'written' is the action as the worker (or a
-- moderator's overturn) wrote it, in the transaction of its MySQL row, dry-run actions and
-- reversals included; phase 'published' is written when the actions queue accepted an `on`
-- action, so that published_at - message_at is its protection latency. Rows join the
-- verdict table on room_id, window_start, window_end, pipeline_version (written rows), and
-- each other on idempotency_key; a reversal names the key it undoes in reverses. No row
-- holds a raw account id: offender is a keyed pseudonym, on written forward actions only.
-- Partition projection computes the partitions from the key layout. Replace
-- {{lake_location}} with the lake root, for example s3://chatguard-lake/events/.
CREATE EXTERNAL TABLE IF NOT EXISTS protective_action (
  event_id         string    COMMENT 'UUID from the idempotency key and the phase; see the _dedup view',
  event_type       string,
  occurred_at      timestamp COMMENT 'UTC, millisecond precision: issued_at (written) or published_at; the partition is its hour',
  schema_version   int,
  received_at      timestamp COMMENT 'when the consumer received the message (UTC)',
  idempotency_key  string    COMMENT 'the action''s key, the same on every copy the chat service receives',
  phase            string    COMMENT 'written | published',
  room_id          string,
  window_start     timestamp COMMENT 'the verdict''s window; NULL on published rows',
  window_end       timestamp,
  pipeline_version string    COMMENT 'NULL on published rows',
  verdict_revision int,
  action           string    COMMENT 'escalate | warn_counterpart | warn_sender | hold_transaction | restrict_sender | retract_notice | release_transaction | lift_restriction',
  mode             string    COMMENT 'dry_run | on',
  source           string    COMMENT 'realtime | batch | sweep | on_demand | moderator',
  rule_id          string    COMMENT 'the policy rule that decided it (a reversal keeps its action''s)',
  category         string,
  penalty          string,
  policy_version   string,
  policy_hash      string,
  reverses         string    COMMENT 'the key a reversal or re-application undoes; NULL on a forward action',
  offender         string    COMMENT 'keyed pseudonym (hmac2:...) of the account acted on; NULL without a key, on escalate, reversals and published rows',
  message_at       timestamp COMMENT 'the newest message of the reviewed window: protection latency starts here',
  issued_at        timestamp,
  expires_at       timestamp,
  published_at     timestamp COMMENT 'when the actions queue accepted it; published rows only',
  sends            int       COMMENT 'sends the publish took (0 on written rows)'
)
PARTITIONED BY (`dt` string, `hour` string)
STORED AS PARQUET
LOCATION '{{lake_location}}event_type=protective_action/'
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
  'storage.location.template' = '{{lake_location}}event_type=protective_action/dt=${dt}/hour=${hour}/',
  'parquet.compression' = 'ZSTD'
)
