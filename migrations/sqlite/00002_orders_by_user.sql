-- The quick start's copy of migrations/mysql/00002: shoppers list their orders.

-- +goose Up
CREATE INDEX orders_user_id ON orders (user_id, id);

-- +goose Down
DROP INDEX orders_user_id;
