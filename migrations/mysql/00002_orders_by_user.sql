-- A shopper lists their own orders (GET /api/v1/orders): the index walks
-- one user's orders in id order. It is the only cost of private orders on
-- the order path; the ids clients see are encrypted, not stored.

-- +goose Up
CREATE INDEX orders_user_id ON orders (user_id, id);

-- +goose Down
DROP INDEX orders_user_id ON orders;
