-- +goose Up
-- What a verdict_campaigns row is (pipeline.CampaignClass):
--
--   campaign       a campaign signal the review gave the stages (as before)
--   repeat_sender  a signal that is one account repeating its own greeting
--                  or contact (verified, or with an established clean
--                  history): shown as one line on the account page, never
--                  as a campaign
--   sighting       a mark the review counted that was below the campaign
--                  threshold, kept so that a campaign found later can link
--                  this room (retro-linking)
--   linked         a sighting the campaign join linked to a campaign found
--                  later: the room is one of the campaign's rooms
--
-- The campaign view, its bulk take and decision, the account page's
-- campaigns and the analysts' campaign queries read campaign and linked
-- rows only. Existing rows are campaign signals. The campaign join reads
-- the rows of its window by ix_verdict_campaigns_decided.
ALTER TABLE verdict_campaigns
    ADD COLUMN class VARCHAR(16) NOT NULL DEFAULT 'campaign' AFTER senders,
    ADD KEY ix_verdict_campaigns_decided (decided_at);

-- +goose Down
-- Without the class, code before this migration would read sightings as
-- campaign signals: they go (a repeat sender's row stays, as the campaign
-- signal it was before).
DELETE FROM verdict_campaigns WHERE class IN ('sighting', 'linked');
ALTER TABLE verdict_campaigns DROP KEY ix_verdict_campaigns_decided, DROP COLUMN class;
