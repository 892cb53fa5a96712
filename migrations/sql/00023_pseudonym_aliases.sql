-- +goose Up
-- Keyed pseudonyms changed form: every purpose now has its own key derived
-- from the one secret (quote digests, subjects, campaign marks: 'hmac2:';
-- moderator ids: keyed 'mod2-' instead of an unkeyed hash of the e-mail,
-- 'mod-'). Neither form can be computed from the other without the raw
-- value, which MySQL does not hold for marks and moderators, so while
-- --legacy-pseudonyms is on the writers that see a raw value record both
-- forms here and re-key what MySQL stored in the legacy one:
--
--   purpose        'subject', 'campaign' or 'moderator'
--   legacy_value   the form stored before ('hmac:<24 hex>', 'mod-<16 hex>')
--   current_value  the form written now ('hmac2:<24 hex>', 'mod2-<24 hex>')
--   first_seen     when a writer first saw the pair, UTC
--
-- The worker writes the pairs of a verdict's subjects and campaign marks
-- in the verdict's save transaction and moves verdict_campaigns rows of
-- the legacy mark to the current one; the console writes a moderator's
-- pair when they sign in and moves their decisions and takes. The lake's
-- events cannot be rewritten: analysts join its legacy values through
-- this table (docs/analysts.md). It holds no raw id. Drop its rows once
-- the lake no longer holds legacy values the analysts need
-- (docs/operations.md, "Pseudonym keys").
CREATE TABLE IF NOT EXISTS pseudonym_aliases (
    purpose        VARCHAR(16)  NOT NULL,
    legacy_value   VARCHAR(64)  NOT NULL,
    current_value  VARCHAR(64)  NOT NULL,
    first_seen     DATETIME(6)  NOT NULL,
    PRIMARY KEY (purpose, legacy_value),
    KEY ix_pseudonym_aliases_current (purpose, current_value)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Re-keying a moderator's decisions finds them by moderator.
ALTER TABLE moderator_decisions
    ADD KEY ix_moderator_decisions_moderator (moderator);

-- +goose Down
ALTER TABLE moderator_decisions
    DROP KEY ix_moderator_decisions_moderator;
DROP TABLE IF EXISTS pseudonym_aliases;
