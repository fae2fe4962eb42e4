-- The quick start's copy of migrations/mysql/00006: order events.

-- +goose Up
CREATE TABLE order_events (
    id           INTEGER  NOT NULL PRIMARY KEY AUTOINCREMENT,
    event_id     TEXT     NOT NULL,
    order_id     INTEGER  NOT NULL,
    type         TEXT     NOT NULL
        CHECK (type IN ('created', 'paid', 'cancelled', 'expired', 'allocated', 'lapsed')),
    status       TEXT     NOT NULL,
    at           DATETIME NOT NULL,
    published_at DATETIME NULL
);
CREATE INDEX order_events_unpublished ON order_events (published_at, id);
INSERT INTO leader_fences (name) VALUES ('order-events');

-- +goose Down
DELETE FROM leader_fences WHERE name = 'order-events';
DROP TABLE order_events;
