-- +goose Up
-- The campaign signals a verdict carried: one row per scam-script
-- fingerprint or contact value that the review found shared across rooms
-- fleet-wide, written in the verdict's save transaction. It is what links a
-- room to the other rooms running the same script, for the console's
-- campaign view and the analysts' campaign queries.
--
--   verdict_id  the verdicts row
--   kind        'script' (a near-duplicate fingerprint of a risky message's
--               normalised text) or 'contact' (a messenger id, phone number
--               or account number the message carried)
--   mark        'hmac:<24 hex>': a keyed HMAC of the fingerprint or contact
--               value; neither text nor contact can be recovered from it
--   message_id  the room's first message carrying it (the campaign view
--               fetches that message live from the chat API, masked)
--   rooms       distinct rooms fleet-wide with this mark in the sliding
--               24 h window when the review ran (approximate above a cap)
--   senders     distinct senders likewise
--   room_id, label, category, decided_at: copied from the verdict so the
--               campaign queries read ix_verdict_campaigns_mark only
--
-- Verdicts saved before this table have no rows. The cascade removes rows
-- with their verdict (retention).
CREATE TABLE IF NOT EXISTS verdict_campaigns (
    verdict_id  BIGINT UNSIGNED NOT NULL,
    kind        VARCHAR(16)     NOT NULL,
    mark        VARCHAR(40)     NOT NULL,
    message_id  VARCHAR(128)    NOT NULL,
    rooms       INT UNSIGNED    NOT NULL,
    senders     INT UNSIGNED    NOT NULL,
    room_id     VARCHAR(128)    NOT NULL,
    label       VARCHAR(16)     NOT NULL,
    category    VARCHAR(32)     NOT NULL,
    decided_at  DATETIME(6)     NOT NULL,
    PRIMARY KEY (verdict_id, kind, mark),
    KEY ix_verdict_campaigns_mark (mark, decided_at, room_id, label, category),
    CONSTRAINT fk_verdict_campaigns_verdict FOREIGN KEY (verdict_id) REFERENCES verdicts (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS verdict_campaigns;
