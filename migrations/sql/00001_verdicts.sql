-- +goose Up
-- Placeholder: the worker issue defines the verdict tables here.
CREATE TABLE IF NOT EXISTS schema_placeholder (id INT PRIMARY KEY);

-- +goose Down
DROP TABLE IF EXISTS schema_placeholder;
