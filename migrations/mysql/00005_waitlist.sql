-- The waitlist (issue 48): an order placed with "wait" where no unit can
-- serve it is stored `waiting`, holding no unit, and becomes `pending`
-- when units return to its SKU, in arrival order, in the transaction that
-- returns them; at the sale's end it is `lapsed`. A waiting order counts
-- toward its buyer's per-user limit (user_purchases.quantity), as a unit
-- would once allocated.

-- +goose Up
ALTER TABLE orders DROP CONSTRAINT orders_status_known;
ALTER TABLE orders
    -- arrival is the request's arrival at the service (unix µs, the
    -- instance's clock, kept across 429s): the waitlist's order.
    ADD COLUMN arrival      BIGINT      NULL,
    -- allocated_at is when a waiting order was given its units.
    ADD COLUMN allocated_at DATETIME(6) NULL,
    -- joined_version is the SKU row's version the batch that made the
    -- order waiting wrote; allotted_version the one the transaction that
    -- gave it units wrote. Each of those transactions locks the row and
    -- bumps its version, so the versions order them exactly, as the
    -- times cannot (the audit's allotted_in_order); NULL when it never
    -- waited, or was never given units.
    ADD COLUMN joined_version   BIGINT NULL,
    ADD COLUMN allotted_version BIGINT NULL,
    ADD CONSTRAINT orders_status_known CHECK (status IN ('pending', 'paid', 'cancelled', 'expired', 'waiting', 'lapsed')),
    ADD CONSTRAINT orders_waiting_arrival CHECK (status <> 'waiting' OR arrival IS NOT NULL);

-- A SKU's waiters in arrival order: the returning transaction's read.
CREATE INDEX orders_waiting ON orders (sku_id, status, arrival, id);

ALTER TABLE skus
    -- waiters counts the SKU's waiting orders: order.waitlist_max bounds it.
    ADD COLUMN waiters BIGINT NOT NULL DEFAULT 0,
    ADD CONSTRAINT skus_waiters_nonnegative CHECK (waiters >= 0);

ALTER TABLE user_purchases
    -- waiting is 1 while the buyer has a waiting order of the SKU: one at most.
    ADD COLUMN waiting TINYINT NOT NULL DEFAULT 0,
    ADD CONSTRAINT user_purchases_one_waiting CHECK (waiting BETWEEN 0 AND 1);

-- +goose Down
-- Down fails, changing nothing, while an order waits or lapsed: the old
-- schema cannot hold it (the first statement checks).
ALTER TABLE orders
    ADD CONSTRAINT orders_status_before_waitlist CHECK (status IN ('pending', 'paid', 'cancelled', 'expired'));
ALTER TABLE user_purchases
    DROP CONSTRAINT user_purchases_one_waiting,
    DROP COLUMN waiting;
ALTER TABLE skus
    DROP CONSTRAINT skus_waiters_nonnegative,
    DROP COLUMN waiters;
DROP INDEX orders_waiting ON orders;
ALTER TABLE orders
    DROP CONSTRAINT orders_waiting_arrival,
    DROP CONSTRAINT orders_status_known;
ALTER TABLE orders
    DROP COLUMN allotted_version,
    DROP COLUMN joined_version,
    DROP COLUMN allocated_at,
    DROP COLUMN arrival,
    ADD CONSTRAINT orders_status_known CHECK (status IN ('pending', 'paid', 'cancelled', 'expired'));
ALTER TABLE orders DROP CONSTRAINT orders_status_before_waitlist;
