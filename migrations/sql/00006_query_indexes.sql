-- +goose Up
-- Indexes for the queries people run (README "For analysts", the review
-- queue of storage/mysql/queue.go) and for retention (`worker purge`). Each
-- is checked with EXPLAIN by storage/mysql's tests and timed on a million
-- verdicts by `make bench-mysql`. InnoDB appends the primary key (id) to
-- every secondary index, so each ends in id: the queue's keyset order
-- (severity DESC, window_start DESC, id DESC) is the index order read
-- backwards.
--
--   ix_verdicts_queue           the queue: status, label, then its order
--   ix_verdicts_queue_category  the queue filtered by category
--   ix_verdicts_run_queue       the queue filtered by run (replaces
--                               ix_verdicts_run, which is its prefix)
--   ix_verdicts_label_window    recent abusive/suspicious rooms (analysts)
--                               and the queue over a short period: the
--                               period's entries carry severity and
--                               confidence, so the sort reads the index
--                               only and just the rows returned are read
--   ix_verdicts_finished        per-stage latency of recent reviews: the
--                               verdicts finished in a period, joined to
--                               their stage rows by primary key (replaces
--                               ix_verdicts_status_finished, which no query
--                               used: stage figures want every status)
--   ix_verdicts_created         retention: the newest verdict older than the
--                               cutoff bounds the purge's primary-key walk
ALTER TABLE verdicts
    DROP KEY ix_verdicts_run,
    DROP KEY ix_verdicts_status_finished,
    ADD KEY ix_verdicts_queue (status, label, severity, window_start),
    ADD KEY ix_verdicts_queue_category (status, label, category, severity, window_start),
    ADD KEY ix_verdicts_run_queue (run_id, status, label, severity, window_start),
    ADD KEY ix_verdicts_label_window (status, label, window_start, severity, confidence),
    ADD KEY ix_verdicts_finished (finished_at),
    ADD KEY ix_verdicts_created (created_at);

-- +goose Down
ALTER TABLE verdicts
    DROP KEY ix_verdicts_created,
    DROP KEY ix_verdicts_finished,
    DROP KEY ix_verdicts_label_window,
    DROP KEY ix_verdicts_run_queue,
    DROP KEY ix_verdicts_queue_category,
    DROP KEY ix_verdicts_queue,
    ADD KEY ix_verdicts_status_finished (status, finished_at),
    ADD KEY ix_verdicts_run (run_id);
