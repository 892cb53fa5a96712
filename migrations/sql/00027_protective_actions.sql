-- +goose Up
-- Protective actions (pipeline/action.go, docs/actions.md): one row per
-- action the policy took about a verdict, in either mode, written in the
-- verdict's own save transaction together with the outbox row that sends
-- an `on` action to the `actions` queue; and one row per reversal. The
-- policy's per-rule daily caps and per-account limits count these rows,
-- the console lists a room's actions from them, and the dry-run report
-- compares them with moderators' decisions.
--
--   idempotency_key  the action's key (unique): every copy on the queue
--                    carries it
--   room_id, account_id  the room and the account acted on ('' for an
--                    escalation, which is about the room)
--   rule_id, action, mode  the policy rule, the action, dry_run or on
--   reverses         on a reversal or a re-application, the key it undoes
--                    or re-applies; NULL on a forward action
--   state            written (taken), reversed (a later row reverses it)
--   window_start, window_end, pipeline_version, verdict_revision  the
--                    verdict that decided it
--   policy_version, policy_hash  the policy that decided it
--   message_at       the newest message of the reviewed window (NULL when
--                    unknown): protection latency is measured from it
--   created_at, expires_at  when decided; when the action is stale
--   body             the action's body as the queue receives it (ids and
--                    enumerations only): what an undone overturn re-applies
--
-- No chat text, no model text, no moderator e-mail.
CREATE TABLE IF NOT EXISTS protective_actions (
    id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    idempotency_key  VARCHAR(128)    NOT NULL,
    room_id          VARCHAR(128)    NOT NULL,
    account_id       VARCHAR(128)    NOT NULL DEFAULT '',
    rule_id          VARCHAR(32)     NOT NULL,
    action           VARCHAR(32)     NOT NULL,
    mode             VARCHAR(16)     NOT NULL,
    source           VARCHAR(16)     NOT NULL,
    reverses         VARCHAR(128)    NULL,
    state            VARCHAR(16)     NOT NULL DEFAULT 'written',
    window_start     DATETIME(6)     NULL,
    window_end       DATETIME(6)     NULL,
    pipeline_version VARCHAR(64)     NOT NULL DEFAULT '',
    verdict_revision INT             NOT NULL DEFAULT 0,
    policy_version   VARCHAR(64)     NOT NULL,
    policy_hash      CHAR(64)        NOT NULL,
    message_at       DATETIME(6)     NULL,
    created_at       DATETIME(6)     NOT NULL,
    expires_at       DATETIME(6)     NOT NULL,
    body             MEDIUMBLOB      NULL,
    PRIMARY KEY (id),
    UNIQUE KEY ux_protective_actions_key (idempotency_key),
    KEY ix_protective_actions_room (room_id, created_at),
    KEY ix_protective_actions_rule (rule_id, created_at),
    KEY ix_protective_actions_account (account_id, created_at),
    KEY ix_protective_actions_created (created_at),
    CONSTRAINT ck_protective_actions_mode CHECK (mode IN ('dry_run', 'on')),
    CONSTRAINT ck_protective_actions_state CHECK (state IN ('written', 'reversed'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Notice suppression: a notice of one rule about one account in one room
-- holds its row until `until`; a second notice in the period finds the
-- row held and is not written. The row lock of this upsert is what keeps
-- two windows of one room, saved at once, from both warning.
CREATE TABLE IF NOT EXISTS notice_suppressions (
    room_id     VARCHAR(128) NOT NULL,
    account_id  VARCHAR(128) NOT NULL,
    rule_id     VARCHAR(32)  NOT NULL,
    until       DATETIME(6)  NOT NULL,
    PRIMARY KEY (room_id, account_id, rule_id),
    KEY ix_notice_suppressions_until (until)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS notice_suppressions;
DROP TABLE IF EXISTS protective_actions;
