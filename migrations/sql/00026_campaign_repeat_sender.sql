-- +goose Up
-- A campaign signal may be one account repeating its own greeting or
-- contact (a shop's auto-greeting, a seller's saved phrase) rather than a
-- campaign: fewer senders than a campaign needs, from an account that is
-- verified or has an established clean history (pipeline/campaign). Such
-- rows are kept, so that the account page can say "repeat sender", but
-- the campaign view, its bulk take and decision, and the analysts'
-- campaign queries read only rows with repeat_sender = 0.
ALTER TABLE verdict_campaigns
    ADD COLUMN repeat_sender TINYINT(1) NOT NULL DEFAULT 0 AFTER senders;

-- +goose Down
ALTER TABLE verdict_campaigns DROP COLUMN repeat_sender;
