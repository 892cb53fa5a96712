-- +goose Up
-- Converts databases whose tables were created with the server's default
-- character set (latin1 on MariaDB before 11.6 and on some managed parameter
-- groups, where a Korean rationale failed the save with "Incorrect string
-- value") to the options 00001 and 00002 now declare: utf8mb4, identifiers
-- and codes in utf8mb4_bin, free text in utf8mb4_unicode_ci.
--
-- Both collations exist on MySQL 8 and MariaDB 10.11+. utf8mb4_bin for room
-- ids and the other keys because they are opaque, case-sensitive ids: under
-- a _ci collation 'AbC' and 'abc' collide on uq_review and the upsert would
-- overwrite one room's verdict with the other's. (Converting from a _ci
-- collation to _bin can never create duplicates, only the reverse could.)
--
-- CONVERT TO rebuilds each table (a copy that blocks writes for its
-- duration; a no-op rebuild where the tables are already right). On a large
-- verdicts table, run it in a quiet hour or with an online schema change
-- tool (gh-ost, pt-online-schema-change) and mark the version applied.
-- CONVERT widens latin1 TEXT to MEDIUMTEXT to keep its capacity; the MODIFY
-- that follows restores the declared types.
ALTER TABLE verdicts ENGINE=InnoDB, CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
ALTER TABLE verdicts
    MODIFY rationale TEXT COLLATE utf8mb4_unicode_ci NULL,
    MODIFY error     TEXT COLLATE utf8mb4_unicode_ci NULL;
ALTER TABLE verdict_stages ENGINE=InnoDB, CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
ALTER TABLE verdict_stages
    MODIFY error TEXT COLLATE utf8mb4_unicode_ci NULL;
ALTER TABLE batch_runs ENGINE=InnoDB, CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
ALTER TABLE batch_runs
    MODIFY error VARCHAR(1024) COLLATE utf8mb4_unicode_ci NULL;

-- +goose Down
-- Nothing: converting back could lose every character the old set cannot
-- hold, and the declared options of 00001/00002 are utf8mb4 anyway.
SELECT 1;
