-- The order lifecycle (issue 13): an order reserves its units while
-- `pending` (awaiting payment until expires_at), then becomes `paid`, or
-- `cancelled` / `expired`, which return its units to stock. A returned
-- unit leaves skus.sold, so sold counts exactly the units of live orders
-- (pending + paid) and stock + sold = total_stock keeps holding. Orders
-- that existed before are paid: they were final at creation.

-- +goose Up
ALTER TABLE orders
    ADD COLUMN status     VARCHAR(16) NOT NULL DEFAULT 'paid',
    -- expires_at is when a pending order stops waiting for its payment;
    -- NULL for an order paid at creation (order.payment_timeout 0).
    ADD COLUMN expires_at DATETIME(6) NULL,
    -- settled_at is when the order left pending (paid, cancelled or expired).
    ADD COLUMN settled_at DATETIME(6) NULL,
    ADD CONSTRAINT orders_status_known CHECK (status IN ('pending', 'paid', 'cancelled', 'expired')),
    ADD CONSTRAINT orders_pending_expires CHECK (status <> 'pending' OR expires_at IS NOT NULL);

-- The sweep reads the pending orders that are due, oldest first.
CREATE INDEX orders_due ON orders (status, expires_at);

-- leader_fences holds, per leader-elected job, the highest fencing token
-- of the lock lease that wrote under it: the expiry sweeper's transaction
-- advances it first, so a sweeper whose lease was superseded (paused past
-- it) has its transaction refused by the database. writes makes every
-- accepted advance change the row (MySQL counts changed rows).
CREATE TABLE leader_fences (
    name   VARCHAR(64) NOT NULL,
    fence  BIGINT      NOT NULL DEFAULT 0,
    writes BIGINT      NOT NULL DEFAULT 0,
    PRIMARY KEY (name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
INSERT INTO leader_fences (name) VALUES ('order-expiry');

-- +goose Down
DROP TABLE leader_fences;
DROP INDEX orders_due ON orders;
ALTER TABLE orders
    DROP CONSTRAINT orders_pending_expires,
    DROP CONSTRAINT orders_status_known,
    DROP COLUMN settled_at,
    DROP COLUMN expires_at,
    DROP COLUMN status;
