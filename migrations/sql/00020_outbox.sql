-- +goose Up
-- The transactional outbox: every message a producer owes a queue because
-- of something it committed in MySQL is written here in that same
-- transaction, and a relay (pipeline/outbox, run by the worker) sends it
-- later, so that a process killed between its commit and its send loses
-- nothing. The verdict's lake event is the first producer (written in the
-- verdict's save transaction); protective actions and the console's
-- moderator_feedback events are meant to write here too, with no change
-- to this table.
--
--   destination  the queue's role (feedback, actions, ...): a relay sends
--                only the destinations it has a queue for
--   event_id     the id the consumer deduplicates by (a lake event's
--                event_id, an action's idempotency key); unique per
--                destination, so that writing one event twice keeps one
--                row (the first: its copy is the one that may have left)
--   payload      the message body as sent
--   attributes   the message attributes as a JSON object of
--                {"Name": {"type": "String", "value": "..."}}, NULL when
--                none: room for a trace context to ride along
--   available_at when a relay may take the row: the write's time, then a
--                claim's lease end (a relay killed mid-send leaves the row
--                to another relay after the lease), then a failed send's
--                backoff
--   attempts     sends tried (claims taken)
--   sent_at      when the queue accepted the message; NULL while pending
--   last_error   why the last send failed (the queue's answer, never the
--                payload)
--
-- ix_outbox_pending (sent_at, available_at): a relay's claim walks the
-- pending end (sent_at IS NULL) in available_at order and stops at its
-- batch, locking only the rows it takes (FOR UPDATE SKIP LOCKED, MariaDB
-- 10.6+ and MySQL 8.0+), so relays on several pods take distinct rows. The
-- backlog gauge reads the same end, and the retention's delete of old
-- sent rows is a range of the sent end.
CREATE TABLE IF NOT EXISTS outbox (
    id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    destination  VARCHAR(32)     NOT NULL,
    event_id     VARCHAR(128)    NOT NULL,
    payload      MEDIUMBLOB      NOT NULL,
    attributes   JSON            NULL,
    created_at   DATETIME(6)     NOT NULL,
    available_at DATETIME(6)     NOT NULL,
    attempts     INT UNSIGNED    NOT NULL DEFAULT 0,
    sent_at      DATETIME(6)     NULL,
    last_error   VARCHAR(500)    NULL,
    PRIMARY KEY (id),
    UNIQUE KEY ux_outbox_event (destination, event_id),
    KEY ix_outbox_pending (sent_at, available_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS outbox;
