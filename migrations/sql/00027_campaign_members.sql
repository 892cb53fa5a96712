-- +goose Up
-- The campaign each recorded mark belongs to, as the campaign join
-- (pipeline/campaign.Join, a periodic job) last computed it: the marks of
-- one script (its variants' bands, its contacts, the accounts that pushed
-- it) joined into one connected component. campaign is the component's id,
-- its smallest campaign-signal mark. The campaign view, its bulk take and
-- decision and the account page read a mark's campaign through it; a mark
-- without a row is a campaign of its own. Each run replaces the rows it
-- computed and deletes those it no longer found (joined_at older than the
-- run), so the table holds at most the marks of one join window.
CREATE TABLE IF NOT EXISTS campaign_members (
    mark      VARCHAR(40) NOT NULL,
    campaign  VARCHAR(40) NOT NULL,
    joined_at DATETIME(6) NOT NULL,
    PRIMARY KEY (mark),
    KEY ix_campaign_members_campaign (campaign, mark),
    KEY ix_campaign_members_joined (joined_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS campaign_members;
