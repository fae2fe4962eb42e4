-- The schema of the flash sale. The database, not the application, refuses
-- negative stock, stock that does not add up, duplicate idempotency keys and
-- a user over the SKU's per-user limit.

-- +goose Up
CREATE TABLE skus (
    id             BIGINT       NOT NULL AUTO_INCREMENT,
    name           VARCHAR(200) NOT NULL,
    -- total_stock is the initial stock plus every restock: stock + sold
    -- always equals it, so no unit can be sold without being counted.
    total_stock    BIGINT       NOT NULL,
    stock          BIGINT       NOT NULL,
    sold           BIGINT       NOT NULL DEFAULT 0,
    -- version is bumped by every write; the order path's UPDATE requires the
    -- version it read (optimistic concurrency control).
    version        BIGINT       NOT NULL DEFAULT 0,
    -- fence is the highest lock fencing token that wrote this row; a holder
    -- whose lease ran out carries a smaller one and its UPDATE matches no row.
    fence          BIGINT       NOT NULL DEFAULT 0,
    per_user_limit INT          NOT NULL DEFAULT 1,
    starts_at      DATETIME(6)  NULL,
    ends_at        DATETIME(6)  NULL,
    created_at     DATETIME(6)  NOT NULL,
    updated_at     DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    CONSTRAINT skus_stock_nonnegative CHECK (stock >= 0),
    CONSTRAINT skus_sold_nonnegative CHECK (sold >= 0),
    CONSTRAINT skus_stock_adds_up CHECK (stock + sold = total_stock),
    CONSTRAINT skus_limit_positive CHECK (per_user_limit >= 1),
    CONSTRAINT skus_window_ordered CHECK (starts_at IS NULL OR ends_at IS NULL OR starts_at < ends_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE orders (
    id              BIGINT       NOT NULL AUTO_INCREMENT,
    sku_id          BIGINT       NOT NULL,
    user_id         VARCHAR(64)  NOT NULL,
    quantity        INT          NOT NULL,
    idempotency_key VARCHAR(128) NULL,
    created_at      DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY orders_idempotency_key (idempotency_key),
    KEY orders_sku_id (sku_id, id),
    CONSTRAINT orders_sku FOREIGN KEY (sku_id) REFERENCES skus (id),
    CONSTRAINT orders_quantity_positive CHECK (quantity >= 1)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- user_purchases holds what each user bought of each SKU, with the SKU's
-- limit copied in, so that a CHECK constraint can refuse a user over it.
CREATE TABLE user_purchases (
    sku_id         BIGINT      NOT NULL,
    user_id        VARCHAR(64) NOT NULL,
    quantity       INT         NOT NULL,
    per_user_limit INT         NOT NULL,
    PRIMARY KEY (sku_id, user_id),
    CONSTRAINT user_purchases_sku FOREIGN KEY (sku_id) REFERENCES skus (id),
    CONSTRAINT user_purchases_within_limit CHECK (quantity >= 1 AND quantity <= per_user_limit)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE user_purchases;
DROP TABLE orders;
DROP TABLE skus;
