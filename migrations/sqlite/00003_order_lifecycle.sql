-- The quick start's copy of migrations/mysql/00003: the order lifecycle.

-- +goose Up
ALTER TABLE orders ADD COLUMN status TEXT NOT NULL DEFAULT 'paid'
    CHECK (status IN ('pending', 'paid', 'cancelled', 'expired'));
ALTER TABLE orders ADD COLUMN expires_at DATETIME NULL
    CHECK (status <> 'pending' OR expires_at IS NOT NULL);
ALTER TABLE orders ADD COLUMN settled_at DATETIME NULL;
CREATE INDEX orders_due ON orders (status, expires_at);

CREATE TABLE leader_fences (
    name   TEXT    NOT NULL PRIMARY KEY,
    fence  INTEGER NOT NULL DEFAULT 0,
    writes INTEGER NOT NULL DEFAULT 0
);
INSERT INTO leader_fences (name) VALUES ('order-expiry');

-- +goose Down
DROP TABLE leader_fences;
DROP INDEX orders_due;
ALTER TABLE orders DROP COLUMN settled_at;
ALTER TABLE orders DROP COLUMN expires_at;
ALTER TABLE orders DROP COLUMN status;
