-- The quick start's copy of migrations/mysql/00004. SQLite already compares
-- TEXT byte for byte (the BINARY collation, no padding); what changes is
-- the idempotency key's uniqueness, now per (user_id, key). A column's
-- UNIQUE cannot be dropped in SQLite, so the table is rebuilt; no table
-- references orders. Down fails while two buyers' orders share a key.

-- +goose Up
CREATE TABLE orders_new (
    id              INTEGER  NOT NULL PRIMARY KEY AUTOINCREMENT,
    sku_id          INTEGER  NOT NULL REFERENCES skus (id),
    user_id         TEXT     NOT NULL,
    quantity        INTEGER  NOT NULL CHECK (quantity >= 1),
    idempotency_key TEXT     NULL,
    created_at      DATETIME NOT NULL,
    status          TEXT     NOT NULL DEFAULT 'paid'
        CHECK (status IN ('pending', 'paid', 'cancelled', 'expired')),
    expires_at      DATETIME NULL
        CHECK (status <> 'pending' OR expires_at IS NOT NULL),
    settled_at      DATETIME NULL,
    UNIQUE (user_id, idempotency_key)
);
INSERT INTO orders_new (id, sku_id, user_id, quantity, idempotency_key, created_at, status, expires_at, settled_at)
    SELECT id, sku_id, user_id, quantity, idempotency_key, created_at, status, expires_at, settled_at FROM orders;
DROP TABLE orders;
ALTER TABLE orders_new RENAME TO orders;
CREATE INDEX orders_sku_id ON orders (sku_id, id);
CREATE INDEX orders_user_id ON orders (user_id, id);
CREATE INDEX orders_due ON orders (status, expires_at);

-- +goose Down
CREATE TABLE orders_old (
    id              INTEGER  NOT NULL PRIMARY KEY AUTOINCREMENT,
    sku_id          INTEGER  NOT NULL REFERENCES skus (id),
    user_id         TEXT     NOT NULL,
    quantity        INTEGER  NOT NULL CHECK (quantity >= 1),
    idempotency_key TEXT     NULL UNIQUE,
    created_at      DATETIME NOT NULL,
    status          TEXT     NOT NULL DEFAULT 'paid'
        CHECK (status IN ('pending', 'paid', 'cancelled', 'expired')),
    expires_at      DATETIME NULL
        CHECK (status <> 'pending' OR expires_at IS NOT NULL),
    settled_at      DATETIME NULL
);
INSERT INTO orders_old (id, sku_id, user_id, quantity, idempotency_key, created_at, status, expires_at, settled_at)
    SELECT id, sku_id, user_id, quantity, idempotency_key, created_at, status, expires_at, settled_at FROM orders;
DROP TABLE orders;
ALTER TABLE orders_old RENAME TO orders;
CREATE INDEX orders_sku_id ON orders (sku_id, id);
CREATE INDEX orders_user_id ON orders (user_id, id);
CREATE INDEX orders_due ON orders (status, expires_at);
