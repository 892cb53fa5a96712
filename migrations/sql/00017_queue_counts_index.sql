-- +goose Up
-- The queue header's counts (open items by category and by how long they
-- have waited) read every open item. Through ix_verdicts_queue each of
-- them cost a lookup of its whole verdicts row for category and
-- finished_at: at 1 M verdicts (128 k open) that was 26 s, so the page
-- showed the counts as unavailable. This index holds every column the
-- count reads (status, label, category, finished_at, and the primary key
-- id for the decisions anti-join), so the count is a range scan of the
-- index alone. One more secondary index to maintain on each verdict
-- upsert; no table or trigger to keep in step.
ALTER TABLE verdicts
    ADD KEY ix_verdicts_queue_counts (status, label, category, finished_at);

-- +goose Down
ALTER TABLE verdicts
    DROP KEY ix_verdicts_queue_counts;
