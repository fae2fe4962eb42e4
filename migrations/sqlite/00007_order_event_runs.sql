-- The quick start's copy of migrations/mysql/00007: order events by the
-- batch. SQLite's store writes a row an order (a run of one).

-- +goose Up
ALTER TABLE order_events ADD COLUMN last_order_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE order_events ADD COLUMN step INTEGER NOT NULL DEFAULT 1;
UPDATE order_events SET last_order_id = order_id;

-- +goose Down
ALTER TABLE order_events DROP COLUMN step;
ALTER TABLE order_events DROP COLUMN last_order_id;
