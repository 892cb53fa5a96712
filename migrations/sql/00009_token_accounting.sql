-- +goose Up
-- Token accounting (what each review cost): per stage, the prompt tokens the server
-- served from its prefix cache (usage.prompt_tokens_details.cached_tokens,
-- 0 when the server does not say) and the stage's cost in USD at the
-- answering pool's configured prices (llm.Price). tokens_in stays the whole
-- prompt, cached tokens included, as the servers report it.
ALTER TABLE verdict_stages
    ADD COLUMN tokens_cached INT UNSIGNED NOT NULL DEFAULT 0 AFTER tokens_out,
    ADD COLUMN cost_usd      DOUBLE       NOT NULL DEFAULT 0 AFTER tokens_cached;

-- +goose Down
ALTER TABLE verdict_stages
    DROP COLUMN cost_usd,
    DROP COLUMN tokens_cached;
