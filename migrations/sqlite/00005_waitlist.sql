-- The quick start's copy of migrations/mysql/00005: the waitlist. The
-- status CHECK cannot be altered in SQLite, so orders is rebuilt, as in
-- 00004.

-- +goose Up
CREATE TABLE orders_new (
    id              INTEGER  NOT NULL PRIMARY KEY AUTOINCREMENT,
    sku_id          INTEGER  NOT NULL REFERENCES skus (id),
    user_id         TEXT     NOT NULL,
    quantity        INTEGER  NOT NULL CHECK (quantity >= 1),
    idempotency_key TEXT     NULL,
    created_at      DATETIME NOT NULL,
    status          TEXT     NOT NULL DEFAULT 'paid'
        CHECK (status IN ('pending', 'paid', 'cancelled', 'expired', 'waiting', 'lapsed')),
    expires_at      DATETIME NULL
        CHECK (status <> 'pending' OR expires_at IS NOT NULL),
    settled_at      DATETIME NULL,
    arrival         INTEGER  NULL
        CHECK (status <> 'waiting' OR arrival IS NOT NULL),
    allocated_at    DATETIME NULL,
    joined_version  INTEGER  NULL,
    allotted_version INTEGER NULL,
    UNIQUE (user_id, idempotency_key)
);
INSERT INTO orders_new (id, sku_id, user_id, quantity, idempotency_key, created_at, status, expires_at, settled_at)
    SELECT id, sku_id, user_id, quantity, idempotency_key, created_at, status, expires_at, settled_at FROM orders;
DROP TABLE orders;
ALTER TABLE orders_new RENAME TO orders;
CREATE INDEX orders_sku_id ON orders (sku_id, id);
CREATE INDEX orders_user_id ON orders (user_id, id);
CREATE INDEX orders_due ON orders (status, expires_at);
CREATE INDEX orders_waiting ON orders (sku_id, status, arrival, id);

ALTER TABLE skus ADD COLUMN waiters INTEGER NOT NULL DEFAULT 0 CHECK (waiters >= 0);
ALTER TABLE user_purchases ADD COLUMN waiting INTEGER NOT NULL DEFAULT 0 CHECK (waiting BETWEEN 0 AND 1);

-- +goose Down
ALTER TABLE user_purchases DROP COLUMN waiting;
ALTER TABLE skus DROP COLUMN waiters;
CREATE TABLE orders_old (
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
INSERT INTO orders_old (id, sku_id, user_id, quantity, idempotency_key, created_at, status, expires_at, settled_at)
    SELECT id, sku_id, user_id, quantity, idempotency_key, created_at, status, expires_at, settled_at FROM orders;
DROP TABLE orders;
ALTER TABLE orders_old RENAME TO orders;
CREATE INDEX orders_sku_id ON orders (sku_id, id);
CREATE INDEX orders_user_id ON orders (user_id, id);
CREATE INDEX orders_due ON orders (status, expires_at);
