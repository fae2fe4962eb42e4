-- Ids are compared byte for byte, as the service compares them: utf8mb4_bin
-- is a PAD SPACE collation ('u' = 'u '), so the database took ids the
-- service tells apart for one user or one key. VARBINARY compares bytes
-- with no padding on MySQL 8 and MariaDB alike (utf8mb4_nopad_bin is
-- MariaDB's name only, utf8mb4_0900_bin MySQL's); the service bounds the
-- ids in bytes, as VARBINARY does.
--
-- Idempotency keys become the buyer's own: unique per (user_id, key), so
-- one buyer's key neither blocks nor reveals another's.
--
-- Down fails while two buyers' orders share a key (changing nothing), or
-- while two holdings of a SKU differ only by trailing spaces (after orders
-- went back): the old schema cannot hold them.

-- +goose Up
ALTER TABLE orders
    MODIFY user_id         VARBINARY(64)  NOT NULL,
    MODIFY idempotency_key VARBINARY(128) NULL,
    DROP INDEX orders_idempotency_key,
    ADD UNIQUE KEY orders_user_idempotency_key (user_id, idempotency_key);
ALTER TABLE user_purchases
    MODIFY user_id VARBINARY(64) NOT NULL;

-- +goose Down
ALTER TABLE orders
    DROP INDEX orders_user_idempotency_key,
    ADD UNIQUE KEY orders_idempotency_key (idempotency_key),
    MODIFY user_id         VARCHAR(64)  NOT NULL,
    MODIFY idempotency_key VARCHAR(128) NULL;
ALTER TABLE user_purchases
    MODIFY user_id VARCHAR(64) NOT NULL;
