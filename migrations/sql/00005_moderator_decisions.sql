-- +goose Up
-- What a moderator decided about a verdict. The console writes
-- these rows; this minimal schema exists now so that retention (`worker
-- purge`) can keep every verdict a moderator acted on.
--
--   verdict_id  the verdicts row decided on (its id; the review key is on that row)
--   moderator   who decided (the console's user id, never a name or e-mail)
--   decision    confirm: the pipeline's label stands; overturn: it does not
--   label       the label the moderator settled on (abusive|suspicious|clean)
--   category    the category the moderator settled on ('' when clean)
--   note        the moderator's free-text note (optional)
--   decided_at  when, UTC
--
-- A verdict may collect several decisions (a second opinion, a reversal);
-- the newest is the one in force. The foreign key is ON DELETE RESTRICT: the
-- database itself refuses to delete a decided verdict, so a purge racing a
-- decision can never drop it.
CREATE TABLE IF NOT EXISTS moderator_decisions (
    id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    verdict_id  BIGINT UNSIGNED NOT NULL,
    moderator   VARCHAR(128)    NOT NULL,
    decision    VARCHAR(16)     NOT NULL,
    label       VARCHAR(16)     NOT NULL,
    category    VARCHAR(32)     NOT NULL DEFAULT '',
    note        TEXT            COLLATE utf8mb4_unicode_ci NULL,
    decided_at  DATETIME(6)     NOT NULL,
    PRIMARY KEY (id),
    KEY ix_moderator_decisions_verdict (verdict_id, decided_at),
    KEY ix_moderator_decisions_decided (decided_at),
    CONSTRAINT ck_moderator_decisions_decision CHECK (decision IN ('confirm', 'overturn')),
    CONSTRAINT ck_moderator_decisions_label CHECK (label IN ('abusive', 'suspicious', 'clean')),
    CONSTRAINT fk_moderator_decisions_verdict FOREIGN KEY (verdict_id) REFERENCES verdicts (id) ON DELETE RESTRICT
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS moderator_decisions;
