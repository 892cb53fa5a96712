-- +goose Up
-- A moderator's control of one protective action by its key, and the
-- policy's retraction of a rule's live actions (docs/actions.md):
--
-- * moderation_actions gains two kinds, each written before it acts:
--   'reverse_action' (one action reversed by its key: a moderator's, or
--   the policy's own when a new policy file removed its rule or took its
--   action's mode off `on`; its moderator is then "policy:<version>") and
--   'confirm_action' (a moderator confirms one action);
-- * protective_actions records the confirmation: confirmed_by (the
--   moderator's pseudonymous id, '' while unconfirmed) and confirmed_at;
--   and which overturn reversed a forward action (reversed_by_decision,
--   the moderator decision's id; NULL when written, or reversed by its key
--   or a policy change), so that undoing that overturn re-applies only
--   what the overturn took back;
-- * action_policy_runs records each policy file whose retraction step has
--   run to its end, by hash: a process that starts on a recorded hash has
--   nothing to retract.
--
--   policy_hash     the file's SHA-256 (hex)
--   policy_version  its declared version
--   applied_at      when its retraction step ended
--   retracted       how many live actions that step reversed
ALTER TABLE moderation_actions DROP CONSTRAINT ck_moderation_actions_action;
ALTER TABLE moderation_actions ADD CONSTRAINT ck_moderation_actions_action CHECK (action IN ('take', 'release', 'override_take',
    'override_decided', 'decide', 'bulk_decide', 'take_campaign', 'release_campaign', 'stop', 'reveal',
    'reverse_action', 'confirm_action'));

ALTER TABLE protective_actions ADD COLUMN confirmed_by VARCHAR(128) NOT NULL DEFAULT '' AFTER state;
ALTER TABLE protective_actions ADD COLUMN confirmed_at DATETIME(6) NULL AFTER confirmed_by;
ALTER TABLE protective_actions ADD COLUMN reversed_by_decision BIGINT UNSIGNED NULL AFTER confirmed_at;
CREATE INDEX ix_protective_actions_live ON protective_actions (state, created_at);

CREATE TABLE IF NOT EXISTS action_policy_runs (
    policy_hash     CHAR(64)     NOT NULL,
    policy_version  VARCHAR(64)  NOT NULL,
    applied_at      DATETIME(6)  NOT NULL,
    retracted       INT          NOT NULL DEFAULT 0,
    PRIMARY KEY (policy_hash)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS action_policy_runs;
DROP INDEX ix_protective_actions_live ON protective_actions;
ALTER TABLE protective_actions DROP COLUMN reversed_by_decision;
ALTER TABLE protective_actions DROP COLUMN confirmed_at;
ALTER TABLE protective_actions DROP COLUMN confirmed_by;
ALTER TABLE moderation_actions DROP CONSTRAINT ck_moderation_actions_action;
ALTER TABLE moderation_actions ADD CONSTRAINT ck_moderation_actions_action CHECK (action IN ('take', 'release', 'override_take',
    'override_decided', 'decide', 'bulk_decide', 'take_campaign', 'release_campaign', 'stop', 'reveal'));
