-- The quick start's embedded schema: the same tables and constraints as
-- migrations/mysql, in SQLite's dialect.

-- +goose Up
CREATE TABLE skus (
    id             INTEGER  NOT NULL PRIMARY KEY AUTOINCREMENT,
    name           TEXT     NOT NULL,
    total_stock    INTEGER  NOT NULL,
    stock          INTEGER  NOT NULL CHECK (stock >= 0),
    sold           INTEGER  NOT NULL DEFAULT 0 CHECK (sold >= 0),
    version        INTEGER  NOT NULL DEFAULT 0,
    fence          INTEGER  NOT NULL DEFAULT 0,
    per_user_limit INTEGER  NOT NULL DEFAULT 1 CHECK (per_user_limit >= 1),
    starts_at      DATETIME NULL,
    ends_at        DATETIME NULL,
    created_at     DATETIME NOT NULL,
    updated_at     DATETIME NOT NULL,
    CHECK (stock + sold = total_stock),
    CHECK (starts_at IS NULL OR ends_at IS NULL OR starts_at < ends_at)
);

CREATE TABLE orders (
    id              INTEGER  NOT NULL PRIMARY KEY AUTOINCREMENT,
    sku_id          INTEGER  NOT NULL REFERENCES skus (id),
    user_id         TEXT     NOT NULL,
    quantity        INTEGER  NOT NULL CHECK (quantity >= 1),
    idempotency_key TEXT     NULL UNIQUE,
    created_at      DATETIME NOT NULL
);
CREATE INDEX orders_sku_id ON orders (sku_id, id);

CREATE TABLE user_purchases (
    sku_id         INTEGER NOT NULL REFERENCES skus (id),
    user_id        TEXT    NOT NULL,
    quantity       INTEGER NOT NULL,
    per_user_limit INTEGER NOT NULL,
    PRIMARY KEY (sku_id, user_id),
    CHECK (quantity >= 1 AND quantity <= per_user_limit)
);

-- +goose Down
DROP TABLE user_purchases;
DROP TABLE orders;
DROP TABLE skus;
