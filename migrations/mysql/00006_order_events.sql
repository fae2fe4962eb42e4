-- Order events (issue 51): a transactional outbox. Each transaction that
-- changes orders inserts one row here per order changed, in the same
-- transaction (events.enabled), so an event exists if and only if its
-- change committed. The relay (package events) publishes the rows in id
-- order and marks them; published rows are deleted after
-- events.retention. An order's later change locks its row, which its
-- earlier change held until COMMIT: its events' ids follow its changes.
-- id orders the rows only; event_id names the event to the broker and
-- its consumers: random, so that a database restored from a backup or
-- recreated, which numbers its rows again, never reissues one.

-- +goose Up
CREATE TABLE order_events (
    id           BIGINT      NOT NULL AUTO_INCREMENT,
    -- event_id: 128 random bits in hex, the broker's message id.
    event_id     CHAR(32)    NOT NULL,
    order_id     BIGINT      NOT NULL,
    -- type is the change: created, paid, cancelled, expired, allocated, lapsed.
    type         VARCHAR(16) NOT NULL,
    -- status is the order's status after the change.
    status       VARCHAR(16) NOT NULL,
    at           DATETIME(6) NOT NULL,
    -- published_at is when the relay had the broker's acknowledgement.
    published_at DATETIME(6) NULL,
    PRIMARY KEY (id),
    CONSTRAINT order_events_type_known CHECK (type IN ('created', 'paid', 'cancelled', 'expired', 'allocated', 'lapsed'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The relay's read: unpublished rows (NULL first) in id order; and the
-- prune's, published rows oldest first.
CREATE INDEX order_events_unpublished ON order_events (published_at, id);

-- An order's events in order: the audit's walk of each order's chain
-- (seckill audit, events.enabled).
CREATE INDEX order_events_order ON order_events (order_id, id);

-- The relay's leader fence, as the expiry sweeper's (00003).
INSERT INTO leader_fences (name) VALUES ('order-events');

-- +goose Down
DELETE FROM leader_fences WHERE name = 'order-events';
DROP TABLE order_events;
