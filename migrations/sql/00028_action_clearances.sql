-- +goose Up
-- Cleared states: a moderator's overturn of a verdict clears the account
-- for each rule that acted on it, until `until` (the policy's
-- cleared_for), as a human-removed label stays removed: the next
-- window's verdict about the same account cannot re-warn or re-restrict
-- it under the same rule.
--
--   account_id, rule_id  who is cleared for what
--   until        when the clearance ends
--   cleared_at   when the overturn recorded it
--   decision_id  the moderator decision that cleared it (NULL when a
--                policy change retracted the rule)
CREATE TABLE IF NOT EXISTS action_clearances (
    account_id   VARCHAR(128)    NOT NULL,
    rule_id      VARCHAR(32)     NOT NULL,
    until        DATETIME(6)     NOT NULL,
    cleared_at   DATETIME(6)     NOT NULL,
    decision_id  BIGINT UNSIGNED NULL,
    PRIMARY KEY (account_id, rule_id),
    KEY ix_action_clearances_until (until)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS action_clearances;
